#!/usr/bin/env bash
# The device call for the figures still owed (issues 27 and 28), from a main build packed by
# scripts/gpu_pack.sh (.gpu). The A/B harness of 2026-12-06-1630 (the DeltaNet decode in column
# slices, the route inside gate/up) is in this file's history at 2e5a9a1; those builds are gone.
#   scripts/gpu_session_run.sh h200     on an H200 only: 35B-A3B 8k prefill and decode at batch 1 / 8
#                                       (two rounds) and 64
#   scripts/gpu_session_run.sh quant    27B q4 / q8 / fp8 decode at batch 1, 8, 16, 64; 9B and 0.8B at batch 1;
#                                       35B-A3B q4 at batch 1, 16, 64
#   scripts/gpu_session_run.sh parity   the quantized and MoE CUDA tests (the demo models end to end too)
#   scripts/gpu_session_run.sh figures  parity, then on an H200 h200; then quant
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/gpu_libs.sh
export QWENRT_SOURCE_DIR=$PWD
bin=$(gpu_bin_dir .gpu)
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
q() { timeout 120 "$bin/qwenrt" bench --device cuda "$@" 2>&1 | grep -E '^(decode|prefill)' | sed 's/ \+/ /g; s/ floor.*-> / /; s/, [0-9.]* TFLOP.s//' | tr '\n' ' '; }
on_h200() { nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; }
h200() {
  for round in 1 2; do
    echo "35b-a3b 8k: $(q --synthetic 35b-a3b --prompt-tokens 8192 --gen-tokens 2)"
    echo "35b-a3b b1: $(q --synthetic 35b-a3b --prompt-tokens 512 --gen-tokens 64) | b8: $(q --synthetic 35b-a3b --prompt-tokens 512 --gen-tokens 32 --batch 8)"
  done
  echo "35b-a3b b64: $(q --synthetic 35b-a3b --prompt-tokens 512 --gen-tokens 32 --batch 64)"
}
quant() {
  for quant in q4 q8 fp8; do
    for b in 1 8 16 64; do echo "27b $quant b$b: $(q --synthetic 27b --quant $quant --prompt-tokens 512 --gen-tokens 32 --batch $b)"; done
    for size in 9b 0.8b; do echo "$size $quant b1: $(q --synthetic $size --quant $quant --prompt-tokens 512 --gen-tokens 64)"; done
  done
  # Packed experts at 16 and 64 rows: through the decode launches since 2026-12-07 (not yet timed).
  for b in 1 16 64; do echo "35b-a3b q4 b$b: $(q --synthetic 35b-a3b --quant q4 --prompt-tokens 256 --gen-tokens 16 --batch $b)"; done
}
parity() {
  "$bin/qwenrt_cuda_tests" --gtest_filter='*Quant*:*Moe*:*MoE*:*Fp8*:*FP8*:*Affine*' 2>&1 | grep -E '^\[  (PASSED|FAILED) |FAILED \]|rel' | tail -40
}
case "${1:-figures}" in
  h200) if on_h200; then h200; else echo "not an H200: nothing run"; fi ;;
  quant) quant ;;
  parity) parity ;;
  figures) parity; if on_h200; then h200; fi; quant ;;
  *) echo "usage: gpu_session_run.sh h200|quant|parity|figures" >&2; exit 2 ;;
esac
