#!/usr/bin/env bash
# One device call over this checkout's scripts/gpu_pack.sh build: the whole CUDA suite, then the
# headline figures it changes (27B and 9B q4 decode, 35B-A3B 8k prefill), with a summary.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/gpu_libs.sh
export QWENRT_SOURCE_DIR=$PWD
b=$(gpu_bin_dir "${BIN:-.gpu}")
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 300 "$b/qwenrt_cuda_tests" > "${OUT:-/tmp}/tests.log" 2>&1
echo "tests: exit $?; $(grep -E '^\[  (PASSED|FAILED)' "${OUT:-/tmp}/tests.log" | tr '\n' ' ')"
grep -E "^\[  FAILED  \] [A-Za-z]" "${OUT:-/tmp}/tests.log" | head
for cfg in "27b --quant q4 --prompt-tokens 512 --gen-tokens 32" "9b --quant q4 --prompt-tokens 512 --gen-tokens 32" "35b-a3b --prompt-tokens 8192 --gen-tokens 4"; do
  echo "$cfg: $(timeout 100 "$b/qwenrt" bench --device cuda --synthetic $cfg 2>&1 | grep -E '^(prefill|decode)' | tr '\n' ' ')"
done
