#!/usr/bin/env bash
# MTP speculation and deterministic mode on the GPU machine, over binaries built by
# scripts/gpu_pack.sh:
#   scripts/gpu_speculation.sh [BIN_DIR] [TEXT] [--no-tests]
# Runs the CUDA tests (all, or QWENRT_GTEST_FILTER), then `qwenrt bench --speculative mtp` on the
# demo model over TEXT (held-back text) and on random 27B / 9B weights at forced accept rates
# 0 / 0.6 / 0.75 / 0.9 (and --deterministic), then the plain decode cost of --deterministic at
# batch 1 / 16 / 64. Logs under /tmp, JSON lines and a summary table in $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
bin=${1:-.gpu}
text=${2:-.gpu/gpl3.txt}
no_tests=${3:-}
keep=${OUT:-/tmp/qwenrt-gpu}
out=/tmp/qwenrt-gpu-logs
mkdir -p "$out" "$keep"
export QWENRT_SOURCE_DIR=$PWD
source scripts/gpu_libs.sh
bin=$(gpu_bin_dir "$bin")
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "$out/gpu.txt"
summary=()
if [ "$no_tests" != "--no-tests" ]; then
  timeout "${QWENRT_TEST_TIMEOUT:-600}" "$bin/qwenrt_cuda_tests" --gtest_filter="${QWENRT_GTEST_FILTER:-*}" 2>&1 | tee "$out/tests.log" | grep -E "^\[  (FAILED|PASSED|SKIPPED) |FAILED \]|mtp gpu|Failure|Expected|Which is" | tail -60
  cp "$out/tests.log" "$keep/"
  summary+=("tests: $(grep -E '^\[  PASSED|^\[  FAILED' "$out/tests.log" | tr '\n' ' ')")
fi
row() {  # one bench --speculative JSON line -> a table row
  python3 -c 'import json,sys
j=json.loads(sys.stdin.read())
print("%-16s accept %-5s det %-5s k<=%d: plain %7.1f tok/s, spec %7.1f tok/s = x%.2f, %.2f tok/step, acc/pos %s" % (j["model"].split("/")[-1], j.get("forced_accept_rate","model"), j["deterministic"], j["draft_tokens"], j["decode_tok_s_plain"], j["decode_tok_s_speculative"], j["speedup"], j["mean_tokens_per_step"], ",".join("%.2f" % a for a in j["acceptance_per_position"])))' 2>/dev/null || echo "failed"
}
spec() {  # tag, then bench arguments
  local tag=$1; shift
  local line
  line=$("$bin/qwenrt" bench --device cuda --speculative mtp --json "$@" 2>"$out/spec-$tag.err")
  echo "$line" >>"$keep/speculation.jsonl"
  summary+=("$(echo "$line" | row) [$tag]")
  [ -n "$line" ] || summary+=("  $tag: $(tail -2 "$out/spec-$tag.err" | tr '\n' ' ')")
}
: >"$keep/speculation.jsonl"
if [ -f "$text" ]; then
  for k in 1 3; do spec "demo-k$k" --model models/qwen35-demo-16m -f "$text" --draft-tokens $k --fixed-draft --segments 4 --prompt-tokens 128 --gen-tokens 64; done
  spec demo-adaptive --model models/qwen35-demo-16m -f "$text" --draft-tokens 4 --segments 4 --prompt-tokens 128 --gen-tokens 64
fi
# Random weights at forced accept rates: k = 3 (and 4) fixed for the mechanics at each rate, the
# adaptive k at rate 0 (what speculation costs when nothing is accepted), each plain and with
# --deterministic at 0.75.
for size in ${QWENRT_SPEC_SIZES:-27b 9b}; do
  for rate in ${QWENRT_SPEC_RATES:-0.6 0.75 0.9}; do
    spec "$size-$rate-k3" --synthetic "$size" --accept-rate "$rate" --draft-tokens 3 --fixed-draft --prompt-tokens 256 --gen-tokens 64
  done
  spec "$size-0.75-k4" --synthetic "$size" --accept-rate 0.75 --draft-tokens 4 --fixed-draft --prompt-tokens 256 --gen-tokens 64
  spec "$size-0-adaptive" --synthetic "$size" --accept-rate 0 --draft-tokens 3 --prompt-tokens 256 --gen-tokens 256 --segments 1
  spec "$size-0.75-k3-det" --synthetic "$size" --accept-rate 0.75 --draft-tokens 3 --fixed-draft --prompt-tokens 256 --gen-tokens 64 --deterministic
done
# What --deterministic costs plain decode (batches past the 8 rows one decode launch takes).
for b in ${QWENRT_DET_BATCHES:-1 16 64}; do
  for det in "" --deterministic; do
    line=$("$bin/qwenrt" bench --device cuda --synthetic 27b --prompt-tokens 512 --gen-tokens 16 --batch "$b" $det --json 2>"$out/det-$b.err")
    echo "$line" >>"$keep/speculation.jsonl"
    summary+=("27b batch $b ${det:-(plain)}: $(echo "$line" | python3 -c 'import json,sys; j=json.load(sys.stdin); print("decode %.1f tok/s (%.0f%% of floor), prefill %.0f tok/s" % (j["decode_tok_s"], 100*j["decode_fraction_of_floor"], j["prefill_tok_s"]))' 2>/dev/null || tail -1 "$out/det-$b.err")")
  done
done
echo
echo "=== summary ($(cat "$out/gpu.txt"))"
printf '%s\n' "${summary[@]}" | tee "$keep/summary.txt"
