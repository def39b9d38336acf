#!/usr/bin/env bash
# Device calls of this session (issue 28, batch-1 decode): the DeltaNet decode step over four column
# slices a head (.gpu-split) and, on top, the MoE route inside the gate/up launch (.gpu), against
# the build before (.gpu-before), alternated on the same card.
#   scripts/gpu_session_run.sh moe     whole qwenrt_cuda_tests on .gpu; 35B-A3B batch 1 and 8
#   scripts/gpu_session_run.sh dense   27B batch 1 and 64 (before, split); 35B-A3B 8k prefill
#   scripts/gpu_session_run.sh h200    main (.gpu-before) alone, on an H200 only: 35B-A3B 8k prefill and
#                                      decode at batch 1 / 8 / 64; 27B q4 and fp8 batch 1
#   scripts/gpu_session_run.sh quant   main (.gpu-before): 27B q4 / q8 / fp8 decode at batch 1, 8, 64;
#                                      9B and 0.8B at batch 1 (issue 27's figures)
#   scripts/gpu_session_run.sh figures on an H200: the h200 set, then quant; elsewhere quant alone
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/gpu_libs.sh
export QWENRT_SOURCE_DIR=$PWD
new=$(gpu_bin_dir .gpu)
mkdir -p /tmp/qb /tmp/qs && tar -C /tmp/qb -xJf .gpu-before/qwenrt-gpu.tar.xz && tar -C /tmp/qs -xJf .gpu-split/qwenrt-gpu.tar.xz
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
q() { timeout 120 "$1/qwenrt" bench --device cuda "${@:2}" 2>&1 | grep -E '^(decode|prefill)' | sed 's/ \+/ /g; s/ floor.*-> / /; s/, [0-9.]* TFLOP.s//' | tr '\n' ' '; }
name() { case $1 in /tmp/qb) echo before;; /tmp/qs) echo split;; *) echo split+route;; esac; }
mode=${1:-moe}
if [ "$mode" = figures ]; then
  if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then bash "$0" h200; fi
  mode=quant
fi
case "$mode" in
  quant)
    for quant in q4 q8 fp8; do
      for b in 1 8 64; do echo "27b $quant b$b: $(q /tmp/qb --synthetic 27b --quant $quant --prompt-tokens 512 --gen-tokens 32 --batch $b)"; done
      for size in 9b 0.8b; do echo "$size $quant b1: $(q /tmp/qb --synthetic $size --quant $quant --prompt-tokens 512 --gen-tokens 64)"; done
    done ;;
  h200)
    nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 || { echo "not an H200: nothing run"; exit 0; }
    for round in 1 2; do
      echo "35b-a3b 8k: $(q /tmp/qb --synthetic 35b-a3b --prompt-tokens 8192 --gen-tokens 2)"
      echo "35b-a3b b1: $(q /tmp/qb --synthetic 35b-a3b --prompt-tokens 512 --gen-tokens 64) | b8: $(q /tmp/qb --synthetic 35b-a3b --prompt-tokens 512 --gen-tokens 32 --batch 8)"
    done
    echo "35b-a3b b64: $(q /tmp/qb --synthetic 35b-a3b --prompt-tokens 512 --gen-tokens 32 --batch 64)"
    for quant in q4 fp8; do echo "27b $quant b1: $(q /tmp/qb --synthetic 27b --quant $quant --prompt-tokens 512 --gen-tokens 48)"; done ;;
  moe)
    timeout 150 "$new/qwenrt_cuda_tests" > "${OUT:-/tmp}/tests.log" 2>&1
    echo "tests: exit $?; $(grep -E '^\[  (PASSED|FAILED)' "${OUT:-/tmp}/tests.log" | tr '\n' ' ')"
    grep -E "^\[  FAILED  \] [A-Za-z]" "${OUT:-/tmp}/tests.log" | head
    for round in 1 2; do
      for b in /tmp/qb /tmp/qs "$new"; do
        echo "$(name $b): b1 $(q $b --synthetic 35b-a3b --prompt-tokens 512 --gen-tokens 64) | b8 $(q $b --synthetic 35b-a3b --prompt-tokens 512 --gen-tokens 32 --batch 8)"
      done
    done ;;
  dense)
    for round in 1 2; do
      for b in /tmp/qb /tmp/qs; do
        echo "$(name $b): 27b b1 $(q $b --synthetic 27b --prompt-tokens 512 --gen-tokens 48) | b64 $(q $b --synthetic 27b --prompt-tokens 512 --gen-tokens 24 --batch 64)"
      done
    done
    echo "split+route: 35b-a3b 8k $(q $new --synthetic 35b-a3b --prompt-tokens 8192 --gen-tokens 2) / $(q $new --synthetic 35b-a3b --prompt-tokens 8192 --gen-tokens 2)" ;;
esac
