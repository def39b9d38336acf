#!/usr/bin/env bash
# One device call of this session: the MoE decode's down launch with every slot's loads in flight
# (issue 28: 35B-A3B batch-1 decode at 60% of its floor): the MoE and parity GPU tests, then the
# 35B-A3B decode at batch 1 and 8 against main's build (.gpu-before) on the same card, and the
# down launch timed by Nsight Compute.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/gpu_libs.sh
export QWENRT_SOURCE_DIR=$PWD
new=$(gpu_bin_dir .gpu)
mkdir -p /tmp/qb && tar -C /tmp/qb -xJf .gpu-before/qwenrt-gpu.tar.xz
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 200 "$new/qwenrt_cuda_tests" --gtest_filter='*Moe*:*moe*:CudaParity*:SchedulerGpu*' > "${OUT:-/tmp}/tests.log" 2>&1
echo "tests: exit $?; $(grep -E '^\[  (PASSED|FAILED)' "${OUT:-/tmp}/tests.log" | tr '\n' ' ')"
grep -E "^\[  FAILED  \] [A-Za-z]" "${OUT:-/tmp}/tests.log" | head
for round in 1 2; do
  for b in /tmp/qb "$new"; do
    for batch in 1 8; do
      echo "$([ $b = /tmp/qb ] && echo before || echo after) b$batch: $(timeout 100 "$b/qwenrt" bench --device cuda --synthetic 35b-a3b --batch $batch --prompt-tokens 512 --gen-tokens 64 2>&1 | grep -E '^decode' | tr '\n' ' ')"
    done
  done
done
ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
timeout 120 "$ncu" --clock-control none -k 'regex:moe_decode' --launch-skip 1000 --launch-count 6 \
  --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed \
  "$new/qwenrt" bench --device cuda --synthetic 35b-a3b --prompt-tokens 64 --gen-tokens 16 > "${OUT:-/tmp}/ncu.log" 2>&1
grep -E "moe_decode|gpu__time_duration|dram__" "${OUT:-/tmp}/ncu.log" | sed 's/  */ /g; s/(const.*) (/ (/' | head -20
