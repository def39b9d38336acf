#pragma once
// The end of a decode product's row tile, shared by skinny_gemm and weight_stream_gemm: one lane's
// four sums of a 16-row × 8-column tile to its outputs.
#include <cuda_bf16.h>

#include <cstdint>

#include "backend/cuda/gate_math.cuh"
#include "backend/cuda/skinny_gemm.h"

namespace qwenrt::cuda {

// v[e]: weight row r (+8 for e >= 2), activation row c0 + (e & 1); rows from seg.rows and
// activation rows from n on are not stored. For SwiGLU pairs v[0..1] are gate row r and v[2..3] up
// row r: act[c · ld_act + r] = bf16(silu(gate) · up). Otherwise y (+)= v.
__device__ __forceinline__ void store_tile_sums(const GemmSegment& seg, bool pairs, __nv_bfloat16* act, int64_t ld_act, int64_t r, int c0,
                                                int n, const float (&v)[4]) {
  if (pairs) {
    if (r >= seg.rows) return;
#pragma unroll
    for (int e = 0; e < 2; ++e)
      if (c0 + e < n) act[(c0 + e) * ld_act + r] = __float2bfloat16_rn(swiglu(v[e], v[e + 2]));
    return;
  }
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    const int64_t row = r + (e >= 2 ? 8 : 0);
    const int col = c0 + (e & 1);
    if (row >= seg.rows || col >= n) continue;
    float* dst = seg.y + col * seg.ldy + row;
    *dst = seg.accumulate ? *dst + v[e] : v[e];
  }
}

}  // namespace qwenrt::cuda
