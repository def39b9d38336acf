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
if [ -f "$bin/qwenrt-gpu.tar.xz" ]; then
  mkdir -p /tmp/qwenrt-gpu-bin && tar -C /tmp/qwenrt-gpu-bin -xJf "$bin/qwenrt-gpu.tar.xz" && bin=/tmp/qwenrt-gpu-bin
fi
export QWENRT_SOURCE_DIR=$PWD  # the fixtures of this checkout, not of the machine that built the tests
# cuBLAS for the benchmarks' comparisons: the toolkit's, else the one PyTorch ships.
for d in /usr/local/cuda/lib64 /usr/local/cuda/lib $(python3 -c 'import nvidia.cublas, os; print(os.path.dirname(nvidia.cublas.__file__) + "/lib")' 2>/dev/null); do
  [ -d "$d" ] && export LD_LIBRARY_PATH="$d:${LD_LIBRARY_PATH:-}"
done
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
if [ "$quick" = "--quick" ]; then configs="0.8b:1 27b:1"; else configs="0.8b:1 9b:1 27b:1 27b:8 27b:32 27b:64"; fi
for cfg in $configs; do
  size=${cfg%%:*}; batch=${cfg##*:}
  line=$("$bin/qwenrt" bench --device cuda --synthetic "$size" --prompt-tokens 512 --gen-tokens 32 --batch "$batch" --json 2>"$out/bench-$size-$batch.err")
  echo "$line" | tee "$out/bench-$size-$batch.json"
  summary+=("bench $size batch $batch: $(echo "$line" | python3 -c 'import json,sys; j=json.load(sys.stdin); print("decode %.1f tok/s, %.0f%% of floor, prefill %.0f tok/s, %.1f GB used" % (j["decode_tok_s"], 100*j["decode_fraction_of_floor"], j["prefill_tok_s"], j.get("gpu_memory_used_GB", 0)))' 2>/dev/null || tail -1 "$out/bench-$size-$batch.err")")
done

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
  echo "## qwenrt bench --device cuda (--prompt-tokens 512 --gen-tokens 32)"
  echo
  echo '```'
  cat "$out"/bench-*.json 2>/dev/null
  echo '```'
  echo
  echo "## Parity lines from the tests"
  echo
  echo '```'
  grep -E "^\[ parity" "$out/tests.log"
  echo '```'
} > "$keep/results.md"
cp "$out/tests.log" "$keep/tests.log"
