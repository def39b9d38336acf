#!/usr/bin/env bash
# Prefill speed with an environment switch off and on, on the GPU machine, over binaries built by
# scripts/gpu_pack.sh:
#   scripts/gpu_prefill_ab.sh VAR [BIN_DIR [OFF ON]]     e.g. QWENRT_CUDA_STATE_WGMMA
# Alternates VAR=OFF and VAR=ON (default 0 and 1) twice over the chunked DeltaNet window alone
# (cuda_deltanet_prefill_bench: 27B 512/8k/32k rows, 9B and 0.8B 8k) and the 27B prefill of 8k
# tokens end to end (qwenrt bench), and prints ms per layer and tok/s per configuration.
set -uo pipefail
cd "$(dirname "$0")/.."
var=${1:?usage: gpu_prefill_ab.sh ENV_VAR [BIN_DIR [OFF ON]]}
bin=${2:-.gpu}
values=("${3:-0}" "${4:-1}")
source scripts/gpu_libs.sh  # (the working directory is the repository root)
bin=$(gpu_bin_dir "$bin")
for round in 1 2; do
  for v in 0 1; do
    echo "== round $round, $var=${values[$v]}: DeltaNet window (ms per layer)"
    env "$var=${values[$v]}" "$bin/cuda_deltanet_prefill_bench" 2>&1 | grep -E '^\| (27B|9B|0.8B) '
  done
done
printf '%-10s %-14s %-14s\n' prefill "$var=${values[0]}" "$var=${values[1]}"
declare -A got=()
for round in 1 2; do
  for v in 0 1; do
    tps=$(env "$var=${values[$v]}" "$bin/qwenrt" bench --device cuda --synthetic 27b --prompt-tokens 8192 --gen-tokens 2 --json 2>/dev/null |
          python3 -c 'import json,sys; print("%.0f" % json.load(sys.stdin)["prefill_tok_s"])' 2>/dev/null || echo fail)
    got[$v]="${got[$v]:-}${got[$v]:+/}$tps"
  done
done
printf '%-10s %-14s %-14s\n' "27b 8k" "${got[0]} tok/s" "${got[1]} tok/s"
