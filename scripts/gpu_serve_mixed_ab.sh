#!/usr/bin/env bash
# One device call: the 27B serving run with 8k prompts and 1k outputs at USERS users (64 on an H200,
# 32 on an H100, where 64 contexts do not fit), with --mixed-steps on and off, same card; then the
# GPU scheduler tests. Over binaries built by scripts/gpu_pack.sh (.gpu).
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/gpu_libs.sh
export QWENRT_SOURCE_DIR=$PWD
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader)
users=${USERS:-$([[ $gpu == *H200* ]] && echo 64 || echo 32)}
echo "$gpu, $users users"
for mode in on off; do
  TAG=mixed-$mode SERVE_ARGS="--mixed-steps $mode" BENCH=0 timeout 280 scripts/gpu_serve_bench.sh "${BIN:-.gpu}" 27b 9216 "$users:8192:1024:$users" | tail -3
done
timeout 100 "$(gpu_bin_dir "${BIN:-.gpu}")/qwenrt_cuda_tests" --gtest_filter='SchedulerGpu*' 2>&1 | grep -E "OK \]|FAILED|PASSED|rel|Failure|Expected|Which" | head -20
# Where a 64-row decode step and the MoE 8k prefill spend their GPU time (QWENRT_CUDA_PROFILE).
b=$(gpu_bin_dir "${BIN:-.gpu}")
QWENRT_CUDA_PROFILE=1 timeout 90 "$b/qwenrt" bench --device cuda --synthetic 27b --batch 64 --prompt-tokens 1024 --gen-tokens 8 2>&1 | grep -E -A16 "GPU time by part|tok/s" | head -24
QWENRT_CUDA_PROFILE=1 timeout 90 "$b/qwenrt" bench --device cuda --synthetic 35b-a3b --prompt-tokens 8192 --gen-tokens 2 2>&1 | grep -E -A16 "GPU time by part|tok/s" | head -24
