#!/usr/bin/env bash
# One device call of this session: the USERS-user (64) serving run (issue 26; 32 fit an H100), then the affine
# decode products (27B) and packed experts (35B-A3B) of this build against main's (.gpu-before), same card.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/gpu_libs.sh
export QWENRT_SOURCE_DIR=$PWD
nvidia-smi --query-gpu=name --format=csv,noheader
users=${USERS:-64}
TAG=serve$users BENCH=0 timeout 420 scripts/gpu_serve_bench.sh .gpu 27b 9216 "$users:8192:1024:$users"
[ "${AB:-1}" = 0 ] && exit 0  # AB=0: the serving run only
new=$(gpu_bin_dir .gpu)
mkdir -p /tmp/qb && tar -C /tmp/qb -xJf .gpu-before/qwenrt-gpu.tar.xz
for b in "$new" /tmp/qb; do
  echo "== $b"
  timeout 60 "$b/cuda_skinny_quant_bench" --quick 2>&1 | grep -E "q4|q8"
  for cfg in 27b:q4 27b:q8 35b-a3b:q4 35b-a3b:q8; do
    size=${cfg%%:*} q=${cfg##*:}
    echo "$size $q: $(timeout 120 "$b/qwenrt" bench --device cuda --synthetic $size --quant $q --prompt-tokens 512 --gen-tokens 32 --json 2>/dev/null |
      python3 -c 'import json,sys; j=json.load(sys.stdin); print("decode %.1f tok/s %.0f%% of floor" % (j["decode_tok_s"], 100*j["decode_fraction_of_floor"]))')"
  done
done
