#!/usr/bin/env bash
# Builds the CPU emulation of the chunked DeltaNet kernels against this checkout's sources (see
# README.md). Output: build/ under this folder (ignored by git).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
out="$here/build"
mkdir -p "$out/gen"
python3 "$here/gen.py" "$repo/src/backend/cuda" "$out/gen"
pids=()
flags="-std=c++20 -O2 -g -DQWENRT_CUDA_EMU -fno-strict-aliasing -Wno-unknown-pragmas -I$here/mock -I$repo/src"
for f in "$out"/gen/*.cpp "$here/driver.cpp" "$here/wgmma_check.cpp" "$here/moe_check.cpp" "$here/quant_check.cpp" "$repo/src/backend/cuda/quant/quant_matrix.cpp" "$repo/src/backend/cuda/diagnostics/wgmma_forms_check_host.cpp" "$repo/src/backend/cuda/runtime/runtime_options.cpp"; do g++ $flags -c "$f" -o "$out/$(basename "${f%.cpp}").o" & pids+=($!); done
# Every compile must succeed, and the link: a failed build must not leave the last driver in place.
for p in "${pids[@]}"; do wait "$p"; done
g++ -o "$out/driver.new" "$out"/*.o
mv "$out/driver.new" "$out/driver"  # (replaces a driver still running)
echo "$out/driver [policy] [eager] [seed] [case]"
