// add_in_place: y[i] += x[i] for i < n, a grid-stride loop (add_in_place.h).
#include <algorithm>
#include <cstdint>

#include "backend/cuda/ptx/mma.cuh"
#include "backend/cuda/rows/add_in_place.h"
#include "backend/cuda/rows/row_launch.h"
#include "backend/cuda/runtime/chained_launch.h"
#include "backend/cuda/runtime/cuda_check.h"

namespace qwenrt::cuda {
namespace {
using namespace row_launch;

__global__ void add_kernel(float* y, const float* x, int64_t n) {
  chained_kernel_start();
  for (int64_t i = blockIdx.x * static_cast<int64_t>(kThreads) + threadIdx.x; i < n; i += static_cast<int64_t>(gridDim.x) * kThreads) y[i] += x[i];
}

}  // namespace

void add_in_place(float* y, const float* x, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  const int64_t blocks = std::min<int64_t>((n + kThreads - 1) / kThreads, 4096);
  launch_chained(add_kernel, dim3(static_cast<unsigned>(blocks)), dim3(kThreads), 0, stream, y, x, n);
  QWENRT_CUDA_CHECK_LAUNCH();
}

}  // namespace qwenrt::cuda
