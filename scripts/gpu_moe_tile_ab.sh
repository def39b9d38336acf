#!/usr/bin/env bash
# One device call: the MoE window's grouped GEMM tiles (QWENRT_MOE_WIDE: unset = 128x128 for
# prompt windows, 1 = 128x256, 0 = the old 64x128), 35B-A3B 8k prefill alternated, then the MoE
# tests. Over binaries in ${BIN:-.gpu}.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/gpu_libs.sh
export QWENRT_SOURCE_DIR=$PWD
b=$(gpu_bin_dir "${BIN:-.gpu}")
nvidia-smi --query-gpu=name --format=csv,noheader
for round in 1 2; do
  for w in 0 1 2 3; do
    echo "round $round wide=${w:-default}: $(QWENRT_MOE_WIDE=$w timeout 100 "$b/qwenrt" bench --device cuda --synthetic 35b-a3b --prompt-tokens 8192 --gen-tokens 4 2>&1 | grep -E '^prefill')"
  done
done
echo "q4 default: $(timeout 100 "$b/qwenrt" bench --device cuda --synthetic 35b-a3b --quant q4 --prompt-tokens 8192 --gen-tokens 4 2>&1 | grep -E '^prefill')"
echo "batch 64 default: $(timeout 100 "$b/qwenrt" bench --device cuda --synthetic 35b-a3b --batch 64 --prompt-tokens 512 --gen-tokens 16 2>&1 | grep -E '^(prefill|decode)' | tr '\n' ' ')"
timeout 200 "$b/qwenrt_cuda_tests" --gtest_filter="*Moe*:*MoE*" 2>&1 | grep -E "OK \]|FAILED|PASSED|rel" | tail -30
