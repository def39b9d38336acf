#pragma once
// RMSNorm's sum of squares as the weight-streaming kernels compute it for the rows they normalise
// themselves: thread t of kThreads takes float4 t, t + kThreads, ... of the row, then its warp's
// lanes are added by butterfly. Adding the warps' sums in warp order gives every block, in every
// such kernel, the same bits for a row's scale.
#include <cuda_bf16.h>

#include <cstdint>

namespace qwenrt::cuda {

template <int kThreads>
__device__ __forceinline__ float warp_square_sum(const float* hr, int64_t k) {
  float ss = 0;
  // Unrolled so that several loads are in flight before the first square is added (same order of
  // additions: the sum's bits do not change).
#pragma unroll 4
  for (int64_t i = 4 * static_cast<int64_t>(threadIdx.x); i < k; i += 4 * kThreads) {
    const float4 v = *reinterpret_cast<const float4*>(hr + i);
    ss += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
  }
#pragma unroll
  for (int o = 16; o > 0; o /= 2) ss += __shfl_xor_sync(0xffffffffu, ss, o);
  return ss;
}

// A row's scale from its warps' sums (warp w's at warp_sums[w · stride]), added in warp order.
template <int kWarpCount>
__device__ __forceinline__ float rms_scale(const float* warp_sums, int stride, int64_t k, float eps) {
  float total = 0;
#pragma unroll
  for (int w = 0; w < kWarpCount; ++w) total += warp_sums[w * stride];
  return rsqrtf(total / static_cast<float>(k) + eps);
}

// Four normalised values h · scale · w rounded to bf16, packed as an 8-byte store.
__device__ __forceinline__ uint2 normalise4_bf16(float4 h, float4 w, float scale) {
  const __nv_bfloat162 lo = __floats2bfloat162_rn(h.x * scale * w.x, h.y * scale * w.y);
  const __nv_bfloat162 hi = __floats2bfloat162_rn(h.z * scale * w.z, h.w * scale * w.w);
  return make_uint2(*reinterpret_cast<const uint32_t*>(&lo), *reinterpret_cast<const uint32_t*>(&hi));
}

}  // namespace qwenrt::cuda
