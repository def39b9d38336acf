// to_bf16_rows: y[r, i] = bf16(x[r, i]) (round to nearest even), one block per row (to_bf16_rows.h).
#include <cstdint>

#include "backend/cuda/ptx/mma.cuh"
#include "backend/cuda/rows/row_launch.h"
#include "backend/cuda/rows/to_bf16_rows.h"
#include "backend/cuda/runtime/chained_launch.h"
#include "backend/cuda/runtime/cuda_check.h"

namespace qwenrt::cuda {
namespace {
using namespace row_launch;

__global__ void to_bf16_kernel(const float* x, int64_t ldx, __nv_bfloat16* y, int64_t ldy, int64_t width) {
  chained_kernel_start();
  const float* xr = x + static_cast<int64_t>(blockIdx.x) * ldx;
  __nv_bfloat16* yr = y + static_cast<int64_t>(blockIdx.x) * ldy;
  for (int64_t i = threadIdx.x; i < width; i += kThreads) yr[i] = __float2bfloat16_rn(xr[i]);
}

}  // namespace

void to_bf16_rows(const float* x, int64_t ldx, __nv_bfloat16* y, int64_t ldy, int64_t rows, int64_t width, cudaStream_t stream) {
  check_rows(rows, "to_bf16_rows");
  if (rows == 0) return;
  launch_chained(to_bf16_kernel, dim3(static_cast<unsigned>(rows)), dim3(kThreads), 0, stream, x, ldx, y, ldy, width);
  QWENRT_CUDA_CHECK_LAUNCH();
}

}  // namespace qwenrt::cuda
