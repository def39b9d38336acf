#pragma once
// What moe_window's two grouped-GEMM kernels (mma.sync in moe_window.cu, warpgroup products in
// moe_grouped_wgmma.cu) share: where a block's tile lies.
#include <cuda_bf16.h>

#include <cstdint>

#include "backend/cuda/moe/moe.h"
#include "backend/cuda/ptx/gate_math.cuh"
#include "backend/cuda/ptx/mma.cuh"

namespace qwenrt::cuda::grouped_tile {

// Block (blockIdx.x, blockIdx.y)'s tile: places [p0, +BM), all of expert e (-1: an unused tile),
// against weight rows of that expert's matrix w from output column n0. kGateUp: K = H, N = I
// output columns, BN / 2 of them a tile (its weight rows: those columns' gate rows, then their up
// rows); else K = I, N = H, BN of them a tile (down rows).
struct Place {
  int e;
  int64_t H, I, K, N, n0, p0;
  const __nv_bfloat16* w;
};
template <int BM, int BN, bool kGateUp>
__device__ __forceinline__ Place place_of(const int32_t* tile_expert, const MoeExperts& ex) {
  const int e = tile_expert[blockIdx.x];
  const int64_t H = ex.hidden, I = ex.inter, expert = e < 0 ? 0 : e;
  return {e,
          H,
          I,
          kGateUp ? H : I,
          kGateUp ? I : H,
          static_cast<int64_t>(blockIdx.y) * (kGateUp ? BN / 2 : BN),
          static_cast<int64_t>(blockIdx.x) * BM,
          kGateUp ? ex.gate_up + expert * 2 * I * H : ex.down + expert * H * I};
}

// Row `row` (0 <= row < BN) of the tile's weights: its output column, and its row in w.
template <int BN, bool kGateUp>
__device__ __forceinline__ int64_t output_column(const Place& t, int row) {
  return t.n0 + (kGateUp ? row % (BN / 2) : row);
}
template <int BN, bool kGateUp>
__device__ __forceinline__ int64_t weight_row(const Place& t, int row) {
  return kGateUp ? (row < BN / 2 ? 0 : t.I) + output_column<BN, kGateUp>(t, row) : output_column<BN, kGateUp>(t, row);
}

// Tile row `row`'s A operand: kGateUp, the x row its place gathers through `sorted` (false for a
// padding place: the copy zero-fills); else the place's own act row.
template <bool kGateUp>
__device__ __forceinline__ const __nv_bfloat16* a_row(const Place& t, const __nv_bfloat16* a, int64_t lda, const int32_t* sorted, int row,
                                                      bool& ok) {
  int64_t src = t.p0 + row;
  ok = true;
  if (kGateUp) {
    const int32_t r = sorted[src];
    ok = r >= 0;
    src = ok ? r : 0;
  }
  return a + src * lda;
}

// The epilogues, two output columns c, c + 1 (< N, N a multiple of 8) of place p at a time:
// gate/up writes act = bf16(silu(g)·u); down writes the f32 sums of a place that reads a row.
__device__ __forceinline__ void store_swiglu(const Place& t, void* out, int64_t p, int64_t c, const float* g, const float* u) {
  __nv_bfloat16* act = static_cast<__nv_bfloat16*>(out) + p * t.I;
  *reinterpret_cast<uint32_t*>(act + c) = pack_bf16(swiglu(g[0], u[0]), swiglu(g[1], u[1]));
}
__device__ __forceinline__ void store_down(const Place& t, void* out, int64_t p, int64_t c, const float* v) {
  *reinterpret_cast<float2*>(static_cast<float*>(out) + p * t.H + c) = make_float2(v[0], v[1]);
}

}  // namespace qwenrt::cuda::grouped_tile
