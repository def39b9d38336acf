#pragma once
// The end of a decode product's row tile (skinny_gemm): one lane's four sums of a 16-row × 8-column
// tile to its outputs.
#include <cuda_bf16.h>

#include <cstdint>

#include "backend/cuda/gemm/skinny_gemm.h"
#include "backend/cuda/ptx/gate_math.cuh"

namespace qwenrt::cuda {

// v[e]: weight row r (+8 for e >= 2), activation row c0 + (e & 1); rows from seg.rows and
// activation rows from n on are not stored. For SwiGLU pairs v[0..1] are gate row r and v[2..3] up
// row r: act[c · ld_act + r] = bf16(silu(gate) · up). Otherwise y (+)= v.
__device__ __forceinline__ void store_tile_sums(const GemmSegment& seg, bool pairs, __nv_bfloat16* act, int64_t ld_act, int64_t r, int c0, int n,
                                                const float (&v)[4]) {
  if (pairs) {
    if (r >= seg.rows) return;
#pragma unroll
    for (int e = 0; e < 2; ++e)
      if (c0 + e < n) act[(c0 + e) * ld_act + r] = __float2bfloat16_rn(swiglu(v[e], v[e + 2]));
    return;
  }
  // The accumulated outputs are all read before the first is written: a store may alias a later
  // load, which would otherwise wait for it (one L2 round trip per output).
  float old[4] = {};
  bool stored[4];
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    stored[e] = r + (e >= 2 ? 8 : 0) < seg.rows && c0 + (e & 1) < n;
    if (stored[e] && seg.accumulate) old[e] = seg.y[(c0 + (e & 1)) * seg.ldy + r + (e >= 2 ? 8 : 0)];
  }
#pragma unroll
  for (int e = 0; e < 4; ++e)
    if (stored[e]) seg.y[(c0 + (e & 1)) * seg.ldy + r + (e >= 2 ? 8 : 0)] = seg.accumulate ? old[e] + v[e] : v[e];
}

}  // namespace qwenrt::cuda
