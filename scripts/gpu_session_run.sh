#!/usr/bin/env bash
# One device call of this session: the MoE prompt windows' grouped GEMMs on warpgroup products
# (issue 28: 35B-A3B 8k prefill >= 50k tok/s): the MoE GPU tests with QWENRT_CUDA_MOE_WGMMA=1 and 0,
# the 8k prefill with both (alternated, same card), and the four launches of a layer timed by
# Nsight Compute.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/gpu_libs.sh
export QWENRT_SOURCE_DIR=$PWD
b=$(gpu_bin_dir "${BIN:-.gpu}")
nvidia-smi --query-gpu=name --format=csv,noheader
for m in 1 0; do
  QWENRT_CUDA_MOE_WGMMA=$m timeout 200 "$b/qwenrt_cuda_tests" --gtest_filter='*Moe*:*moe*:CudaParity*moe*' > "${OUT:-/tmp}/tests-$m.log" 2>&1
  echo "moe_wgmma=$m tests: exit $?; $(grep -E '^\[  (PASSED|FAILED)' "${OUT:-/tmp}/tests-$m.log" | tr '\n' ' ')"
  grep -E "^\[  FAILED  \] [A-Za-z]" "${OUT:-/tmp}/tests-$m.log" | head
done
for round in 1 2; do
  for m in 0 1; do
    echo "moe_wgmma=$m 35b-a3b 8k: $(QWENRT_CUDA_MOE_WGMMA=$m timeout 100 "$b/qwenrt" bench --device cuda --synthetic 35b-a3b --prompt-tokens 8192 --gen-tokens 2 2>&1 | grep -E '^prefill' | tr '\n' ' ')"
  done
done
ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
timeout 120 "$ncu" --clock-control none -k 'regex:moe_(group|grouped|gather)' --launch-count 4 --metrics gpu__time_duration.sum \
  "$b/qwenrt" bench --device cuda --synthetic 35b-a3b --prompt-tokens 8192 --gen-tokens 1 > "${OUT:-/tmp}/ncu.log" 2>&1
grep -E "moe_|gpu__time_duration" "${OUT:-/tmp}/ncu.log" | sed 's/  */ /g; s/(const.*) (/ (/' | head -12
