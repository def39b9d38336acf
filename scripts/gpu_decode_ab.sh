#!/usr/bin/env bash
# Decode speed with an environment switch off and on, on the GPU machine, over binaries built by
# scripts/gpu_pack.sh:
#   scripts/gpu_decode_ab.sh VAR [BIN_DIR [OFF ON]]     e.g. QWENRT_CUDA_PDL, or QWENRT_CUDA_PREFETCH_L2 .gpu 0 1
# Runs `qwenrt bench --device cuda --synthetic M` for 0.8B, 9B and 27B at batch 1 and 27B at
# batch 8 and 64, alternating VAR=OFF and VAR=ON (default 0 and 1) twice, and prints tok/s per
# configuration.
set -uo pipefail
cd "$(dirname "$0")/.."
var=${1:?usage: gpu_decode_ab.sh ENV_VAR [BIN_DIR [OFF ON]]}
bin=${2:-.gpu}
values=("${3:-0}" "${4:-1}")
source scripts/gpu_libs.sh  # (the working directory is the repository root)
bin=$(gpu_bin_dir "$bin")
printf '%-12s %-6s %-12s %-12s\n' model batch "$var=${values[0]}" "$var=${values[1]}"
for cfg in 0.8b:1 9b:1 27b:1 27b:8 27b:64; do
  IFS=: read -r size batch <<<"$cfg"
  declare -A got=()
  for round in 1 2; do
    for v in 0 1; do
      tps=$(env "$var=${values[$v]}" "$bin/qwenrt" bench --device cuda --synthetic "$size" --prompt-tokens 64 --gen-tokens 48 --batch "$batch" --json 2>/dev/null |
            python3 -c 'import json,sys; print("%.1f" % json.load(sys.stdin)["decode_tok_s"])' 2>/dev/null || echo fail)
      got[$v]="${got[$v]:-}${got[$v]:+/}$tps"
    done
  done
  printf '%-12s %-6s %-12s %-12s\n' "$size" "$batch" "${got[0]}" "${got[1]}"
  unset got
done
