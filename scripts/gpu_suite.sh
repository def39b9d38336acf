#!/usr/bin/env bash
# The GPU suite, run on the GPU machine over binaries built by scripts/gpu_pack.sh:
#   scripts/gpu_suite.sh [BIN_DIR] [--quick]
# Runs every CUDA test, then every CUDA benchmark, logs each under $OUT (or /tmp) and prints a
# summary table last.
set -uo pipefail
cd "$(dirname "$0")/.."
bin=${1:-.gpu}
quick=${2:-}
out=${OUT:-/tmp/qwenrt-gpu}
mkdir -p "$out"
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
echo
echo "=== summary"
printf '%s\n' "${summary[@]}"
