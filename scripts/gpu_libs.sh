# Sourced by the GPU machine's scripts: the CUDA toolkit's libraries, else the cuBLAS PyTorch ships,
# on LD_LIBRARY_PATH (the benchmarks compare against cuBLAS).
for d in /usr/local/cuda/lib64 /usr/local/cuda/lib $(python3 -c 'import nvidia.cublas, os; print(os.path.dirname(nvidia.cublas.__file__) + "/lib")' 2>/dev/null); do
  [ -d "$d" ] && export LD_LIBRARY_PATH="$d:${LD_LIBRARY_PATH:-}"
done
