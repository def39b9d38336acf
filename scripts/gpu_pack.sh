#!/usr/bin/env bash
# Builds the CUDA test and benchmark binaries here (nvcc, no GPU needed) and gathers them in .gpu/,
# the folder the device call carries (ignored by git), as one compressed archive. Then, on the GPU
# machine:
#   scripts/gpu_suite.sh .gpu
set -euo pipefail
cd "$(dirname "$0")/.."
build=build/gpu
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DQWENRT_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="${QWENRT_CUDA_ARCHS:-90a-real}" -DCMAKE_CUDA_FLAGS=-lineinfo >/dev/null
targets=(qwenrt qwenrt_cuda_tests)
for b in bench/cuda/*_bench.cpp; do targets+=("cuda_$(basename "$b" .cpp)"); done
cmake --build "$build" -j "$(nproc)" --target "${targets[@]}"
exclude=$(git rev-parse --git-path info/exclude); mkdir -p "$(dirname "$exclude")"; grep -qx '/.gpu/' "$exclude" 2>/dev/null || echo '/.gpu/' >> "$exclude"
# Compressed: the call's whole working tree travels within 64 MiB.
rm -rf .gpu "$build/pack" && mkdir -p .gpu "$build/pack"
for t in "${targets[@]}"; do cp "$build/$t" "$build/pack/"; done
strip "$build/pack"/* 2>/dev/null || true
# qwenrt links Debian's cpp-httplib (the server) and its brotli libraries, which the GPU machine
# lacks: they travel in lib/ (gpu_libs.sh puts it on LD_LIBRARY_PATH).
mkdir -p "$build/pack/lib"
for l in $(ldd "$build/qwenrt" | awk '/libcpp-httplib|libbrotli/ {print $3}'); do cp -L "$l" "$build/pack/lib/"; done
tar -C "$build/pack" -cJf .gpu/qwenrt-gpu.tar.xz .
du -sh .gpu
