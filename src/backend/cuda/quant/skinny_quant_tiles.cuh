#pragma once
// The tensor-core skeleton of the decode-shaped quantized products (skinny_quant_gemm.h), shared by
// the formats (skinny_quant_fp8.cu, skinny_quant_affine.cu): 16-row tiles, the K split among a
// block's 8 warps, the next pieces in flight while the current ones are multiplied, m16n8k16
// products with f32 sums, the warps' sums added in warp order. A format F says how a lane's piece is
// read and how it becomes bf16 fragments:
//
//   F::kBytes   bytes of a lane's piece (16, 8 or 4), read once (load_stream*)
//   F::kElems   columns of a piece; kChunk = 4·kElems columns for the four lanes t = 0..3
//   F::kGroup   pieces a lane keeps in flight
//   F::Rows     what the format needs per pair of weight rows (g, g + 8): built from (m, rg, rh)
//   F::Scales   what it needs per piece: F::Rows::scales(chunk, column) loads it with the piece
//   F::multiply(wg, wh, scales, xv, y): the piece's products added into the lane's sums y (rows g,
//               g + 8 × batch columns 2t, 2t + 1), xv the piece's activations of row g as bf16 pairs
//
// Every sum is taken in a fixed order (a piece's steps, the warp's pieces, then the warps) and a
// batch column never sees another's activations: a row's result is the same bits alone or among 8.
#include <cuda_bf16.h>

#include <cstdint>
#include <span>

#include "backend/cuda/ptx/mma.cuh"
#include "backend/cuda/quant/skinny_quant_gemm.h"
#include "backend/cuda/runtime/chained_launch.h"
#include "backend/cuda/runtime/cuda_check.h"
#include "core/error.h"

namespace qwenrt::cuda::skinny_tiles {

constexpr int kWarps = 8;  // warps of a block split K between them
constexpr int kThreads = kWarps * 32;
constexpr int kTileRows = 16;  // weight rows per block: one m16 tile
constexpr int kRedBytes = kWarps * 4 * 32 * sizeof(float);

struct QuantSegments {
  QuantSegment seg[kSkinnyQuantMaxSegments];
  int first_tile[kSkinnyQuantMaxSegments + 1];  // first row tile of each segment; [count] = all tiles
  int count;
};

// PB bytes that are read once (load_stream16's policy: not kept in L1, evicted first from L2).
template <int PB>
__device__ __forceinline__ void load_piece(const uint8_t* p, uint32_t (&w)[PB / 4]) {
  if constexpr (PB == 16) {
    const uint4 v = load_stream16(p);
    w[0] = v.x, w[1] = v.y, w[2] = v.z, w[3] = v.w;
  } else if constexpr (PB == 8) {
    const uint2 v = load_stream8(p);
    w[0] = v.x, w[1] = v.y;
  } else {
    w[0] = load_stream4(p);
  }
}

// Block = one 16-row tile of one segment; warp w takes chunks w, w + 8, ... of the row; lane (g, t)
// reads its piece of rows g and g + 8 and the activations of row g (batch column g of B; zero past
// n) at the same columns.
template <class F>
__global__ void __launch_bounds__(kThreads, 2) kernel(const __nv_bfloat16* __restrict__ x, int n, int64_t ldx, QuantSegments segs) {
  constexpr int kWords = F::kBytes / 4, kChunk = 4 * F::kElems, kXWords = F::kElems / 2, kGroup = F::kGroup;
  extern __shared__ float4 smem_raw[];
  float* red = reinterpret_cast<float*>(smem_raw);  // the warps' sums: [warp][e][lane] (kRedBytes)
  const int tile = blockIdx.x;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  int si = 0;
  while (si + 1 < segs.count && tile >= segs.first_tile[si + 1]) ++si;
  const QuantSegment& seg = segs.seg[si];
  const QuantMatrix& m = seg.w;
  const int64_t row0 = static_cast<int64_t>(tile - segs.first_tile[si]) * kTileRows;
  // Rows past the weight read row 0 instead: each feeds only its own output row, never stored.
  const int64_t rg = row0 + g < m.rows ? row0 + g : 0, rh = row0 + g + 8 < m.rows ? row0 + g + 8 : 0;
  const int64_t k = m.cols;
  const uint8_t* wg = static_cast<const uint8_t*>(m.data) + rg * m.row_bytes();
  const uint8_t* wh = static_cast<const uint8_t*>(m.data) + rh * m.row_bytes();
  const typename F::Rows rows(m, rg, rh);
  const int chunks = static_cast<int>((k + kChunk - 1) / kChunk);
  const int warp_steps = (chunks + kWarps - 1) / kWarps;  // the same for every warp (extra steps multiply zeros)

  uint32_t next_g[kGroup][kWords], next_h[kGroup][kWords];
  typename F::Scales next_s[kGroup];
  // The column of this lane's piece in its i-th step (-1 past the row).
  auto piece_col = [&](int i) -> int64_t {
    const int64_t c0 = static_cast<int64_t>(warp + i * kWarps) * kChunk + t * F::kElems;
    return c0 < k ? c0 : -1;
  };
  auto load_group = [&](int i0) {
#pragma unroll
    for (int u = 0; u < kGroup; ++u) {
      const int64_t c0 = i0 + u < warp_steps ? piece_col(i0 + u) : -1;
      if (c0 >= 0) {
        load_piece<F::kBytes>(wg + c0 * F::kBytes / F::kElems, next_g[u]);
        load_piece<F::kBytes>(wh + c0 * F::kBytes / F::kElems, next_h[u]);
        next_s[u] = rows.scales(warp + (i0 + u) * kWarps, c0);
      } else {
#pragma unroll
        for (int j = 0; j < kWords; ++j) next_g[u][j] = next_h[u][j] = 0;
        next_s[u] = typename F::Scales{};
      }
    }
  };
  load_group(0);  // weights never change: in flight before the wait on the kernel ahead
  chained_kernel_start();

  const __nv_bfloat16* xrow = x + g * ldx;
  const bool has_row = g < n;
  float y[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  for (int i0 = 0; i0 < warp_steps; i0 += kGroup) {
    uint32_t cur_g[kGroup][kWords], cur_h[kGroup][kWords];
    typename F::Scales cur_s[kGroup];
#pragma unroll
    for (int u = 0; u < kGroup; ++u) {
#pragma unroll
      for (int j = 0; j < kWords; ++j) cur_g[u][j] = next_g[u][j], cur_h[u][j] = next_h[u][j];
      cur_s[u] = next_s[u];
    }
    if (i0 + kGroup < warp_steps) load_group(i0 + kGroup);  // in flight while these are multiplied
#pragma unroll
    for (int u = 0; u < kGroup; ++u) {
      const int64_t c0 = i0 + u < warp_steps ? piece_col(i0 + u) : -1;
      // The piece's activations (row g; zeros past n or past the row).
      uint32_t xv[kXWords];
      if (has_row && c0 >= 0) {
        const __nv_bfloat16* xp = xrow + c0;
        if constexpr (kXWords >= 4) {
#pragma unroll
          for (int j = 0; j < kXWords / 4; ++j) {
            const uint4 v = __ldg(reinterpret_cast<const uint4*>(xp) + j);
            xv[4 * j] = v.x, xv[4 * j + 1] = v.y, xv[4 * j + 2] = v.z, xv[4 * j + 3] = v.w;
          }
        } else {
          const uint2 v = __ldg(reinterpret_cast<const uint2*>(xp));
          xv[0] = v.x, xv[1] = v.y;
        }
      } else {
#pragma unroll
        for (int j = 0; j < kXWords; ++j) xv[j] = 0;
      }
      F::multiply(cur_g[u], cur_h[u], cur_s[u], xv, y);
    }
  }

#pragma unroll
  for (int e = 0; e < 4; ++e) red[(warp * 4 + e) * 32 + lane] = y[e];
  __syncthreads();
  // Thread (e, l) finishes lane l's output e: the warps' sums in warp order.
  if (threadIdx.x >= 4 * 32) return;
  const int e = threadIdx.x / 32, l = threadIdx.x % 32;
  float v = 0.0f;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) v += red[(w * 4 + e) * 32 + l];
  const int64_t row = row0 + l / 4 + (e >= 2 ? 8 : 0);
  const int col = 2 * (l % 4) + (e & 1);
  if (col >= n || row >= m.rows) return;
  float* out = seg.y + col * seg.ldy + row;
  *out = seg.accumulate ? __fadd_rn(*out, v) : v;
}

// The segments of one launch, each weight's rows in whole tiles.
inline QuantSegments gather(std::span<const QuantSegment> segments) {
  QuantSegments segs{};
  int64_t tiles = 0;
  for (const QuantSegment& s : segments) {
    segs.seg[segs.count] = s;
    segs.first_tile[segs.count] = static_cast<int>(tiles);
    tiles += (s.w.rows + kTileRows - 1) / kTileRows;
    ++segs.count;
  }
  if (tiles > (1ll << 31) - 1) fail("skinny_quant_gemm: too many weight rows");
  segs.first_tile[segs.count] = static_cast<int>(tiles);
  return segs;
}

template <class F>
void launch(const __nv_bfloat16* x, int64_t n, int64_t ldx, const QuantSegments& segs, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(segs.first_tile[segs.count]));
  launch_chained(kernel<F>, grid, dim3(kThreads), kRedBytes, stream, x, static_cast<int>(n), ldx, segs);
  QWENRT_CUDA_CHECK_LAUNCH();
}

}  // namespace qwenrt::cuda::skinny_tiles
