#!/usr/bin/env bash
# One device call of this session: the whole CUDA suite on the build with the MoE router product
# padded to a multiple of 8 rows (issue 28), then the 35B-A3B 8k prefill and batch-1 decode against
# the build before (.gpu-before, alternated, same card), with the router product's share.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/gpu_libs.sh
export QWENRT_SOURCE_DIR=$PWD
new=$(gpu_bin_dir .gpu)
mkdir -p /tmp/qb && tar -C /tmp/qb -xJf .gpu-before/qwenrt-gpu.tar.xz
nvidia-smi --query-gpu=name --format=csv,noheader
start=$SECONDS
timeout 330 "$new/qwenrt_cuda_tests" > "${OUT:-/tmp}/tests.log" 2>&1
echo "tests: exit $? in $((SECONDS - start)) s; $(grep -E '^\[  (PASSED|FAILED)' "${OUT:-/tmp}/tests.log" | tr '\n' ' ')"
grep -E "^\[  FAILED  \] [A-Za-z]" "${OUT:-/tmp}/tests.log" | head
for round in 1 2; do
  for b in /tmp/qb "$new"; do
    echo "$([ $b = /tmp/qb ] && echo before || echo after): $(timeout 100 "$b/qwenrt" bench --device cuda --synthetic 35b-a3b --prompt-tokens 8192 --gen-tokens 2 2>&1 | grep -E '^prefill' | tr '\n' ' ') $(timeout 100 "$b/qwenrt" bench --device cuda --synthetic 35b-a3b --prompt-tokens 512 --gen-tokens 32 2>&1 | grep -E '^decode' | tr '\n' ' ')"
  done
done
for b in /tmp/qb "$new"; do
  QWENRT_CUDA_PROFILE=1 timeout 100 "$b/qwenrt" bench --device cuda --synthetic 35b-a3b --prompt-tokens 8192 --gen-tokens 2 2>&1 | grep -E "moe \(cuBLAS\)|moe experts \(grouped\)|moe route"
done
