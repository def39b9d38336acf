#!/usr/bin/env bash
# This session's device call (issue 28's packed experts grouped by expert, and the H200 figures):
#   scripts/gpu_moe_grouped_run.sh figures   on an H200: the 64-user serving run (CHUNK-token windows,
#                                            default 1024) and the 35B-A3B figures
#   scripts/gpu_moe_grouped_run.sh ab        the MoE / quantized CUDA tests, then 35B-A3B packed batches,
#                                            .gpu-base (before) against .gpu (after), alternated
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/gpu_libs.sh
export QWENRT_SOURCE_DIR=$PWD
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
case "${1:?figures or ab}" in
  figures)
    # 1,024-token windows: more mixed steps while prompts prefill, so the first users' outputs
    # advance further before the last prompt is in (2,048 gave 778 output tok/s on 2026-12-06).
    TAG=serve64 BENCH=0 SERVE_ARGS="--prefill-chunk ${CHUNK:-1024}" bash scripts/gpu_serve_bench.sh .gpu 27b 9216 "64:8192:1024:64"
    # The 35B-A3B figures (issue 28), one round.
    bin=$(gpu_bin_dir .gpu)
    for cfg in "8192 2 1" "512 64 1" "512 32 8" "512 32 64"; do
      read -r prompt gen batch <<<"$cfg"
      echo "35b-a3b prompt $prompt batch $batch: $(timeout 120 "$bin/qwenrt" bench --device cuda --synthetic 35b-a3b --prompt-tokens "$prompt" --gen-tokens "$gen" --batch "$batch" 2>&1 | grep -E '^(decode|prefill)' | tr '\n' ' ')"
    done ;;
  ab)
    bin=$(gpu_bin_dir .gpu)
    timeout 240 "$bin/qwenrt_cuda_tests" --gtest_filter='*MoeDecodeGrouped*:MoeKernels*:CudaQuantMoe*' 2>&1 |
      grep -E '^\[  (PASSED|FAILED) |FAILED \]|differ|parity' | tail -30
    bash scripts/gpu_pack_ab.sh .gpu-base/qwenrt-gpu.tar.xz .gpu/qwenrt-gpu.tar.xz 35b-a3b:16:256:16:q4 35b-a3b:64:256:16:q4 35b-a3b:64:256:16:fp8 ;;
esac
