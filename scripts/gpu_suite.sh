#!/usr/bin/env bash
# The GPU suite, run on the GPU machine over binaries built by scripts/gpu_pack.sh:
#   scripts/gpu_suite.sh [BIN_DIR] [--quick]
# Runs every CUDA test, then every CUDA benchmark, logs each under $OUT (or /tmp) and prints a
# summary table last.
set -uo pipefail
cd "$(dirname "$0")/.."
bin=${1:-.gpu}
quick=${2:-}
# Logs go to a scratch folder; only the results page and the test log go to $OUT (the device
# tool returns at most 8 files).
keep=${OUT:-/tmp/qwenrt-gpu}
out=/tmp/qwenrt-gpu-logs
mkdir -p "$out" "$keep"
export QWENRT_SOURCE_DIR=$PWD  # the fixtures of this checkout, not of the machine that built the tests
source scripts/gpu_libs.sh  # (the working directory is the repository root)
bin=$(gpu_bin_dir "$bin")
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv | tee "$out/gpu.txt"
summary=()
"$bin/qwenrt_cuda_tests" 2>&1 | tee "$out/tests.log" | grep -E "^\[  (FAILED|PASSED|SKIPPED) |OK \]|FAILED \]|rel|error" | tail -60
summary+=("tests: $(grep -E '^\[  PASSED|^\[  FAILED' "$out/tests.log" | tr '\n' ' ')")
for b in "$bin"/cuda_*_bench; do
  [ -x "$b" ] || continue
  name=$(basename "$b")
  echo "=== $name"
  "$b" $quick 2>&1 | tee "$out/$name.log"
  summary+=("$name: exit ${PIPESTATUS[0]}")
done
# The engine end to end on random weights with the real shapes (made on the GPU).
echo "=== qwenrt bench --device cuda"
# size:batch:prompt tokens:generated tokens[:quant]. Decode at batch 1..64, then prefill at 512, 8k,
# 32k; then packed weights (MLX affine q4/q8, block FP8: decode and 8k prefill).
if [ "$quick" = "--quick" ]; then configs="0.8b:1:512:32 27b:1:512:32 27b:1:8192:4 27b:1:512:32:q4 27b:1:512:32:fp8"
else configs="0.8b:1:512:32 9b:1:512:32 27b:1:512:32 27b:8:512:32 27b:32:512:32 27b:64:512:32 0.8b:1:8192:4 9b:1:8192:4 27b:1:8192:4 27b:1:32768:4
  27b:1:512:32:q4 27b:1:512:32:q8 27b:1:512:32:fp8 9b:1:512:32:q4 27b:8:512:32:q4 27b:1:8192:4:q4 27b:1:8192:4:fp8"; fi
for cfg in $configs; do
  IFS=: read -r size batch prompt gen quant <<<"$cfg"
  tag="$size-$batch-$prompt${quant:+-$quant}"
  line=$("$bin/qwenrt" bench --device cuda --synthetic "$size" ${quant:+--quant "$quant"} --prompt-tokens "$prompt" --gen-tokens "$gen" --batch "$batch" --json 2>"$out/bench-$tag.err")
  echo "$line" | tee "$out/bench-$tag.json"
  summary+=("bench $size${quant:+ $quant} batch $batch prompt $prompt: $(echo "$line" | python3 -c 'import json,sys; j=json.load(sys.stdin); print("decode %.1f tok/s, %.0f%% of floor, prefill %.0f tok/s = %.0f%% of the bf16 GEMM rate (%.0f TFLOP/s), %.1f GB used" % (j["decode_tok_s"], 100*j["decode_fraction_of_floor"], j["prefill_tok_s"], 100*j.get("prefill_fraction_of_matmul", 0), j.get("measured_matmul_TFLOPs", 0), j.get("gpu_memory_used_GB", 0)))' 2>/dev/null || tail -1 "$out/bench-$tag.err")")
done
# Where a 27B prefill and decode step spend their GPU time.
QWENRT_CUDA_PROFILE=1 "$bin/qwenrt" bench --device cuda --synthetic 27b --prompt-tokens 8192 --gen-tokens 4 >"$out/profile-27b.txt" 2>&1
QWENRT_CUDA_PROFILE=1 "$bin/qwenrt" bench --device cuda --synthetic 0.8b --prompt-tokens 512 --gen-tokens 64 >"$out/profile-0.8b.txt" 2>&1

echo
echo "=== summary"
printf '%s\n' "${summary[@]}"
# A results page for bench/results/: date, commit (QWENRT_COMMIT, the device copy has no .git),
# GPU, commands, then the logs.
{
  echo "# GPU suite: $(head -2 "$out/gpu.txt" | tail -1 | cut -d, -f1)"
  echo
  echo "- date: $(date -u +%Y-%m-%dT%H:%MZ)"
  echo "- commit: ${QWENRT_COMMIT:-unknown}"
  echo "- gpu: $(tail -1 "$out/gpu.txt")"
  echo "- command: scripts/gpu_suite.sh $*"
  echo
  echo "## Summary"
  echo
  printf -- '- %s\n' "${summary[@]}"
  for f in "$out"/cuda_*_bench.log; do
    [ -f "$f" ] || continue
    echo
    echo "## $(basename "$f" .log)"
    echo
    echo '```'
    cat "$f"
    echo '```'
  done
  echo
  echo "## qwenrt bench --device cuda (size:batch:prompt:gen[:quant] = $configs)"
  echo
  echo '```'
  cat "$out"/bench-*.json 2>/dev/null
  echo '```'
  echo
  echo "## GPU time by part (QWENRT_CUDA_PROFILE=1: 27B 8k prefill + 4 decode steps; 0.8B 512 prefill + 64 decode steps)"
  echo
  echo '```'
  cat "$out/profile-27b.txt" "$out/profile-0.8b.txt"
  echo '```'
  echo
  echo "## Parity lines from the tests"
  echo
  echo '```'
  grep -E "^\[ (parity|quant|deltanet prefill)" "$out/tests.log"
  echo '```'
} > "$keep/results.md"
cp "$out/tests.log" "$keep/tests.log"
