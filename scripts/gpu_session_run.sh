#!/usr/bin/env bash
# One device call of this session: the MoE decode launches trimmed (issue 28: the router product
# normalises the rows and stores them for the experts, the down launch adds to the residual,
# gate/up in one wave for one row): the MoE and parity GPU tests, then 35B-A3B decode at batch 1
# and 8 against the build before (.gpu-before, alternated, same card).
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/gpu_libs.sh
export QWENRT_SOURCE_DIR=$PWD
new=$(gpu_bin_dir .gpu)
mkdir -p /tmp/qb && tar -C /tmp/qb -xJf .gpu-before/qwenrt-gpu.tar.xz
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 200 "$new/qwenrt_cuda_tests" --gtest_filter='*Moe*:*moe*:CudaParity*:SkinnyGemm*' > "${OUT:-/tmp}/tests.log" 2>&1
echo "tests: exit $?; $(grep -E '^\[  (PASSED|FAILED)' "${OUT:-/tmp}/tests.log" | tr '\n' ' ')"
grep -E "^\[  FAILED  \] [A-Za-z]" "${OUT:-/tmp}/tests.log" | head
q() { timeout 120 "$1/qwenrt" bench --device cuda "${@:2}" 2>&1 | grep -E '^decode' | sed 's/ \+/ /g; s/ floor.*-> / /' | tr '\n' ' '; }
for round in 1 2; do
  for b in /tmp/qb "$new"; do
    echo "$([ $b = /tmp/qb ] && echo before || echo after): b1 $(q $b --synthetic 35b-a3b --prompt-tokens 512 --gen-tokens 64) | b8 $(q $b --synthetic 35b-a3b --prompt-tokens 512 --gen-tokens 32 --batch 8)"
  done
done
