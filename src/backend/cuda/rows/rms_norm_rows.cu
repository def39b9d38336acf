// rms_norm_rows: y = bf16(x · rsqrt(mean(x²) + eps) · w) per row, by a float4 kernel with the
// fused norms' order of the sum of squares (row_norm.cuh) or a scalar one (rms_norm_rows.h).
#include <cstdint>

#include "backend/cuda/ptx/mma.cuh"
#include "backend/cuda/ptx/row_norm.cuh"
#include "backend/cuda/rows/rms_norm_rows.h"
#include "backend/cuda/rows/row_launch.h"
#include "backend/cuda/runtime/chained_launch.h"
#include "backend/cuda/runtime/cuda_check.h"

namespace qwenrt::cuda {
namespace {
using namespace row_launch;

// Sum over the block (kRowThreads threads); every thread gets the result.
__device__ float block_sum(float v) {
  __shared__ float warp_sums[kRowThreads / 32];
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();  // warp_sums may still be read by a previous call
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();
  float total = 0;
#pragma unroll
  for (int w = 0; w < kRowThreads / 32; ++w) total += warp_sums[w];
  return total;
}

__global__ void rms_norm_kernel(const float* x, int64_t ldx, const float* w, __nv_bfloat16* y, int64_t ldy, int64_t width, float eps,
                                const int32_t* row_index, NonFiniteProbe probe) {
  chained_kernel_start();
  const int64_t src_row = row_index ? row_index[blockIdx.x] : blockIdx.x;
  const float* xr = x + src_row * ldx;
  float ss = 0;
  for (int64_t i = threadIdx.x; i < width; i += kRowThreads) ss += xr[i] * xr[i];
  const float scale = rsqrtf(block_sum(ss) / static_cast<float>(width) + eps);
  if (threadIdx.x == 0 && !(scale > 0.0f)) report_non_finite(probe, src_row);  // 0 for an infinite sum, NaN for NaN
  __nv_bfloat16* yr = y + static_cast<int64_t>(blockIdx.x) * ldy;
  for (int64_t i = threadIdx.x; i < width; i += kRowThreads) yr[i] = __float2bfloat16_rn(xr[i] * scale * w[i]);
}

// Rows of a width in whole float4s, 16-byte aligned: 256 threads, float4 loads and 8-byte stores,
// and the sum of squares in the order of the weight-streaming kernels that normalise rows
// themselves (row_norm.cuh), so fused and separate norms give the same bits. (The scalar kernel
// above moved a prompt's rows at ~45% of copy bandwidth.)
constexpr int kNormThreads = 256;
__global__ void __launch_bounds__(kNormThreads) rms_norm4_kernel(const float* x, int64_t ldx, const float* w, __nv_bfloat16* y, int64_t ldy,
                                                                 int64_t width, float eps, const int32_t* row_index, NonFiniteProbe probe) {
  __shared__ float warp_sums[kNormThreads / 32];
  chained_kernel_start();
  const int64_t src_row = row_index ? row_index[blockIdx.x] : blockIdx.x;
  const float* xr = x + src_row * ldx;
  const float ss = warp_square_sum<kNormThreads>(xr, width);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) warp_sums[warp] = ss;
  __syncthreads();
  const float scale = rms_scale<kNormThreads / 32>(warp_sums, 1, width, eps);
  if (threadIdx.x == 0 && !(scale > 0.0f)) report_non_finite(probe, src_row);  // 0 for an infinite sum, NaN for NaN
  __nv_bfloat16* yr = y + static_cast<int64_t>(blockIdx.x) * ldy;
  for (int64_t i = 4 * static_cast<int64_t>(threadIdx.x); i < width; i += 4 * kNormThreads)
    *reinterpret_cast<uint2*>(yr + i) =
        normalise4_bf16(*reinterpret_cast<const float4*>(xr + i), __ldg(reinterpret_cast<const float4*>(w + i)), scale);
}

}  // namespace

void rms_norm_rows(const float* x, int64_t ldx, const float* w, __nv_bfloat16* y, int64_t ldy, int64_t rows, int64_t width, float eps,
                   cudaStream_t stream, const int32_t* row_index, const NonFiniteProbe& probe) {
  check_rows(rows, "rms_norm_rows");
  if (rows == 0) return;
  const bool vector = width % 4 == 0 && ldx % 4 == 0 && ldy % 4 == 0 && (reinterpret_cast<uintptr_t>(x) | reinterpret_cast<uintptr_t>(w)) % 16 == 0 &&
                      reinterpret_cast<uintptr_t>(y) % 8 == 0;
  if (vector)
    launch_chained(rms_norm4_kernel, dim3(static_cast<unsigned>(rows)), dim3(kNormThreads), 0, stream, x, ldx, w, y, ldy, width, eps, row_index,
                   probe);
  else
    launch_chained(rms_norm_kernel, dim3(static_cast<unsigned>(rows)), dim3(kRowThreads), 0, stream, x, ldx, w, y, ldy, width, eps, row_index, probe);
  QWENRT_CUDA_CHECK_LAUNCH();
}

}  // namespace qwenrt::cuda
