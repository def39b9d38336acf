#pragma once
// RMSNorm's sum of squares as the weight-streaming kernels compute it for the rows they normalise
// themselves: thread t of kThreads takes float4 t, t + kThreads, ... of the row, then its warp's
// lanes are added by butterfly. Adding the warps' sums in warp order gives every block, in every
// such kernel, the same bits for a row's scale.
#include <cstdint>

namespace qwenrt::cuda {

template <int kThreads>
__device__ __forceinline__ float warp_square_sum(const float* hr, int64_t k) {
  float ss = 0;
  for (int64_t i = 4 * static_cast<int64_t>(threadIdx.x); i < k; i += 4 * kThreads) {
    const float4 v = *reinterpret_cast<const float4*>(hr + i);
    ss += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
  }
#pragma unroll
  for (int o = 16; o > 0; o /= 2) ss += __shfl_xor_sync(0xffffffffu, ss, o);
  return ss;
}

}  // namespace qwenrt::cuda
