#!/usr/bin/env bash
# On the GPU machine: the quantized and MoE CUDA tests, then quantized decode and prefill, before
# (BEFORE, an archive of gpu_pack.sh) and after (AFTER) a change, on the same card:
#   scripts/gpu_quant_ab.sh AFTER_DIR BEFORE_DIR
# e.g. carry .gpu (this build) and .gpu-before (main's), then scripts/gpu_quant_ab.sh .gpu .gpu-before
# Prints the tests' verdicts and errors, the skinny quantized product bench of each build, and
# `qwenrt bench` lines: 27B q4/q8/fp8 decode at each batch of BATCHES (default 1) and a 64-token
# prompt, alternated; unless ROWS_ONLY=1, 27B q4 and bf16 8k prefill, 35B-A3B q4 decode and 8k
# prefill, Qwen3-Next-80B-A3B q4 decode, then GPU time by part of the 27B q4 and bf16 8k prefills.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/gpu_libs.sh
export QWENRT_SOURCE_DIR=$PWD
keep=${OUT:-/tmp/qwenrt-gpu}
mkdir -p "$keep" /tmp/qwenrt-before
nvidia-smi --query-gpu=name --format=csv,noheader
new=$(gpu_bin_dir "${1:?AFTER_DIR}")
tar -C /tmp/qwenrt-before -xJf "${2:?BEFORE_DIR}/qwenrt-gpu.tar.xz" && old=/tmp/qwenrt-before
bench() {  # BIN SIZE QUANT PROMPT GEN [BATCH]
  timeout 120 "$1/qwenrt" bench --device cuda --synthetic "$2" ${3:+--quant $3} --prompt-tokens "$4" --gen-tokens "$5" --batch "${6:-1}" --json 2>"$keep/bench.err" |
    python3 -c 'import json,sys; j=json.load(sys.stdin); print("decode %.1f tok/s %.0f%% of floor, prefill %.0f tok/s, %.1f GB" % (j["decode_tok_s"], 100*j["decode_fraction_of_floor"], j["prefill_tok_s"], j.get("gpu_memory_used_GB", 0)))' ||
    tail -2 "$keep/bench.err"
}
timeout 300 "$new/qwenrt_cuda_tests" --gtest_filter='SkinnyQuant*:QuantDecode*:QuantDequant*:CudaQuant*:*Moe*:*MoE*' >"$keep/tests.log" 2>&1
echo "tests exit $?"
grep -E "^\[  (FAILED|PASSED) |FAILED \]|\[ quant|\[ parity" "$keep/tests.log" | head -70
for b in "$new" "$old"; do echo "== cuda_skinny_quant_bench ($b)"; timeout 100 "$b/cuda_skinny_quant_bench" --quick 2>&1 | tail -16; done
for q in q4 q8 fp8; do
  for b in ${BATCHES:-1}; do echo "27b $q b$b after: $(bench "$new" 27b $q 512 32 $b)"; echo "27b $q b$b before: $(bench "$old" 27b $q 512 32 $b)"; done
  echo "27b $q 64-token prompt after: $(bench "$new" 27b $q 64 4)"; echo "27b $q 64-token prompt before: $(bench "$old" 27b $q 64 4)"
done
[ "${ROWS_ONLY:-0}" = 1 ] && exit 0
echo "27b q4 8k after: $(bench "$new" 27b q4 8192 4)"
echo "27b bf16 8k: $(bench "$new" 27b "" 8192 4)"
echo "35b-a3b q4 after: $(bench "$new" 35b-a3b q4 512 32)"
echo "35b-a3b q4 8k after: $(bench "$new" 35b-a3b q4 8192 4)"
echo "next-80b-a3b q4 after: $(bench "$new" next-80b-a3b q4 512 32)"
# Where the 8k prefill spends its GPU time, quantized against bf16 (QWENRT_CUDA_PROFILE: per part).
for q in q4 ""; do
  QWENRT_CUDA_PROFILE=1 timeout 150 "$new/qwenrt" bench --device cuda --synthetic 27b ${q:+--quant $q} --prompt-tokens 8192 --gen-tokens 2 >"$keep/profile-27b-${q:-bf16}-8k.txt" 2>&1
  echo "== profile 27b ${q:-bf16} 8k prefill (top parts)"; grep -A14 "GPU time by part" "$keep/profile-27b-${q:-bf16}-8k.txt" | head -16
done
