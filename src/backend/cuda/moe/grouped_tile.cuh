#pragma once
// What moe_window's two grouped-GEMM kernels (mma.sync in moe_window.cu, warpgroup products in
// moe_grouped_wgmma.cu) share: where a block's tile lies.
#include <cuda_bf16.h>

#include <cstdint>

#include "backend/cuda/moe/moe.h"

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

}  // namespace qwenrt::cuda::grouped_tile
