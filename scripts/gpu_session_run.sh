#!/usr/bin/env bash
# One device call of this session: the whole CUDA suite (mixed windows' decode rows through the
# decode kernels), then the MoE window's launches timed apart by Nsight Compute on the 35B-A3B 8k
# prefill (issue 28: group, gate/up, down, gather), with the prefill rate beside.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/gpu_libs.sh
export QWENRT_SOURCE_DIR=$PWD
b=$(gpu_bin_dir "${BIN:-.gpu}")
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 330 "$b/qwenrt_cuda_tests" > "${OUT:-/tmp}/tests.log" 2>&1
echo "tests: exit $?; $(grep -E '^\[  (PASSED|FAILED)' "${OUT:-/tmp}/tests.log" | tr '\n' ' ')"
grep -E "^\[  FAILED  \] [A-Za-z]|mixed window" "${OUT:-/tmp}/tests.log" | head -20
echo "35b-a3b 8k: $(timeout 100 "$b/qwenrt" bench --device cuda --synthetic 35b-a3b --prompt-tokens 8192 --gen-tokens 2 2>&1 | grep -E '^prefill' | tr '\n' ' ')"
# The first MoE layer's four launches of the 8k window (ncu serialises launches; durations are the kernels' own).
ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
timeout 150 "$ncu" --clock-control none -k 'regex:moe_(group|grouped|gather)' --launch-count 8 --metrics gpu__time_duration.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed,dram__throughput.avg.pct_of_peak_sustained_elapsed \
  "$b/qwenrt" bench --device cuda --synthetic 35b-a3b --prompt-tokens 8192 --gen-tokens 1 > "${OUT:-/tmp}/ncu.log" 2>&1
echo "ncu: exit $?"
grep -E "moe_|gpu__time_duration|sm__throughput|dram__throughput|Grid Size|==ERR|==WARN" "${OUT:-/tmp}/ncu.log" | sed 's/  */ /g' | head -60
