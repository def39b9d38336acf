// copy_in_kernel: dst = src in 16-byte words by a grid-stride kernel (copy_in_kernel.h).
#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "backend/cuda/ptx/mma.cuh"
#include "backend/cuda/rows/copy_in_kernel.h"
#include "backend/cuda/rows/row_launch.h"
#include "backend/cuda/runtime/chained_launch.h"
#include "backend/cuda/runtime/cuda_check.h"

namespace qwenrt::cuda {
namespace {
using namespace row_launch;

__global__ void copy_kernel(const uint4* src, uint4* dst, int64_t n) {
  chained_kernel_start();
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n; i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    dst[i] = src[i];
}

}  // namespace

void copy_in_kernel(const void* src, void* dst, std::size_t bytes, cudaStream_t stream) {
  if (bytes % 16 != 0 || reinterpret_cast<uintptr_t>(src) % 16 != 0 || reinterpret_cast<uintptr_t>(dst) % 16 != 0)
    fail("copy_in_kernel: ", bytes, " bytes must be whole 16-byte words at 16-byte aligned addresses");
  if (bytes == 0) return;
  const int64_t n = static_cast<int64_t>(bytes / 16);
  const int64_t blocks = std::min<int64_t>((n + 255) / 256, 1024);
  launch_chained(copy_kernel, dim3(static_cast<unsigned>(blocks)), dim3(256), 0, stream, static_cast<const uint4*>(src), static_cast<uint4*>(dst), n);
  QWENRT_CUDA_CHECK_LAUNCH();
}

}  // namespace qwenrt::cuda
