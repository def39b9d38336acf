# Sourced by the GPU machine's scripts: the CUDA toolkit's libraries, else the cuBLAS PyTorch ships,
# on LD_LIBRARY_PATH (the benchmarks compare against cuBLAS).
for d in /usr/local/cuda/lib64 /usr/local/cuda/lib $(python3 -c 'import nvidia.cublas, os; print(os.path.dirname(nvidia.cublas.__file__) + "/lib")' 2>/dev/null); do
  [ -d "$d" ] && export LD_LIBRARY_PATH="$d:${LD_LIBRARY_PATH:-}"
done
# The shared libraries gpu_pack.sh carries (cpp-httplib, brotli) where gpu_bin_dir unpacks them.
export LD_LIBRARY_PATH="/tmp/qwenrt-gpu-bin/lib:${LD_LIBRARY_PATH:-}"
# The folder holding the binaries of BIN_DIR: BIN_DIR itself, or where its gpu_pack.sh archive
# (qwenrt-gpu.tar.xz) is unpacked.
gpu_bin_dir() {
  if [ -f "$1/qwenrt-gpu.tar.xz" ]; then
    mkdir -p /tmp/qwenrt-gpu-bin && tar -C /tmp/qwenrt-gpu-bin -xJf "$1/qwenrt-gpu.tar.xz" && echo /tmp/qwenrt-gpu-bin
  else
    echo "$1"
  fi
}
