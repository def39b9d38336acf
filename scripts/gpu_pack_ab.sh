#!/usr/bin/env bash
# Decode and prefill speed of two builds side by side, on the GPU machine, over two archives made by
# scripts/gpu_pack.sh (the one before a change, the one after):
#   scripts/gpu_pack_ab.sh BASE.tar.xz NEW.tar.xz [SIZE:BATCH:PROMPT:GEN[:QUANT] ...]
# Alternates base and new twice per configuration (the clock and power state drift over a run) and
# prints tok/s of both; prefill is printed for prompts of 4096 tokens and more.
set -uo pipefail
base=${1:?usage: gpu_pack_ab.sh BASE.tar.xz NEW.tar.xz [SIZE:BATCH:PROMPT:GEN ...]}
new=${2:?usage: gpu_pack_ab.sh BASE.tar.xz NEW.tar.xz [SIZE:BATCH:PROMPT:GEN ...]}
shift 2
configs=("$@")
[ ${#configs[@]} -eq 0 ] && configs=(0.8b:1:512:32 9b:1:512:32 27b:1:512:32 27b:8:512:32 27b:64:512:32)
source "$(dirname "${BASH_SOURCE[0]}")/gpu_libs.sh"
bins=()
for i in 0 1; do
  archive=$([ $i -eq 0 ] && echo "$base" || echo "$new")
  dir=/tmp/qwenrt-ab-$i
  rm -rf "$dir" && mkdir -p "$dir" && tar -C "$dir" -xJf "$archive" || exit 1
  bins+=("$dir/qwenrt")
done
printf '%-6s %-6s %-7s %-5s | %-24s | %-24s\n' model batch prompt gen "base decode (prefill)" "new decode (prefill)"
for cfg in "${configs[@]}"; do
  IFS=: read -r size batch prompt gen quant <<<"$cfg"
  got=("" "")
  for round in 1 2; do
    for i in 0 1; do
      r=$("${bins[$i]}" bench --device cuda --synthetic "$size" ${quant:+--quant $quant} --prompt-tokens "$prompt" --gen-tokens "$gen" --batch "$batch" --json 2>/dev/null |
          python3 -c 'import json,sys; j=json.load(sys.stdin); p=" (%.0f)" % j["prefill_tok_s"] if j["prompt_tokens"] >= 4096 else ""; print("%.1f%s" % (j["decode_tok_s"], p))' 2>/dev/null || echo fail)
      got[$i]="${got[$i]}${got[$i]:+ / }$r"
    done
  done
  printf '%-6s %-6s %-7s %-5s | %-24s | %-24s\n' "$size${quant:+ $quant}" "$batch" "$prompt" "$gen" "${got[0]}" "${got[1]}"
done
