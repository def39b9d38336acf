// Decode-shaped products over block-FP8 weights on the tensor cores (skinny_quant_gemm.h): 16-row
// tiles, the K split among a block's 8 warps, the next pieces in flight; each e4m3 byte made an
// exact bf16 value by bit moves (quant_decode.cuh fp8_pair_*, times 2^120), m16n8k16 products with
// f32 sums, each tile column's sums scaled once; more than 8 rows as NT n-tiles of 8 (up to 32 rows
// a launch), each weight pair made once per step for all of them. No weight is rounded; a row's
// result is the same bits alone, among 8 or among 32.
#include <cuda_bf16.h>

#include <cstdint>

#include "backend/cuda/ptx/mma.cuh"
#include "backend/cuda/quant/quant_decode.cuh"
#include "backend/cuda/quant/skinny_quant_kernels.h"
#include "backend/cuda/quant/tile_blocks.cuh"
#include "backend/cuda/runtime/chained_launch.h"
#include "backend/cuda/runtime/cuda_check.h"
#include "core/error.h"

namespace qwenrt::cuda {
namespace {

using tile_blocks::kThreads;
using tile_blocks::kTileRows;
using tile_blocks::kWarps;

// How a lane reads its piece of a weight row. Lane (g, t) of a warp reads `PB` bytes of rows g and
// g + 8 of the tile; the four lanes t = 0..3 read neighbouring pieces, a "chunk" of kChunk columns
// that lies inside one FP8 tile column, so one scale finishes the chunk's sums (piece_bytes()).
// Deep: 32 (PB 16) or 16 bytes of each row in flight a lane at two blocks a multiprocessor; else
// half as many at four blocks (launch()); several n-tiles (NT > 1) keep the shallow form's pieces in
// flight at two blocks (their sums take the registers).
template <int PB, bool Deep, int NT = 1>
struct Layout {
  static constexpr int kWords = PB / 4;                               // 32-bit words of a piece
  static constexpr int kElems = PB;                                   // columns of a piece
  static constexpr int kSteps = kElems / 4;                           // m16n8k16 products per piece
  static constexpr int kChunk = 4 * kElems;                           // columns of the four lanes' pieces
  static constexpr int kXWords = kElems / 2;                          // bf16 pairs of activations per piece
  static constexpr int kGroup = (PB == 16 ? 2 : 4) / (Deep ? 1 : 2);  // pieces a lane keeps in flight
  static constexpr int kMinBlocks = Deep || NT > 1 ? 2 : 4;
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

// Word s of a piece: its bytes (0, 2) and (1, 3) as exact bf16 pairs (the e4m3 bits moved under
// bf16's, times 2^120), for the fragment's columns 2t..2t+1 and 2t+8..2t+9; the activations' pairs
// are taken in the same order (b_pairs()), so the product sums the right columns (the dot product
// is order-free in k).
template <int PB>
__device__ __forceinline__ void step_pairs(const uint32_t (&w)[PB / 4], int s, uint32_t& lo, uint32_t& hi) {
  const uint32_t m02 = quant::fp8_pair_02(w[s]), m13 = quant::fp8_pair_13(w[s]);
  const __nv_bfloat162 two120 = __halves2bfloat162(__ushort_as_bfloat16(quant::kBf16Two120), __ushort_as_bfloat16(quant::kBf16Two120));
  const __nv_bfloat162 a = __hmul2(*reinterpret_cast<const __nv_bfloat162*>(&m02), two120);
  const __nv_bfloat162 b = __hmul2(*reinterpret_cast<const __nv_bfloat162*>(&m13), two120);
  lo = *reinterpret_cast<const uint32_t*>(&a);
  hi = *reinterpret_cast<const uint32_t*>(&b);
}

// The activation pairs that meet step s's weight pairs: x holds the piece's activations as bf16
// pairs (x[m] = columns 2m, 2m + 1 of the piece); word s covers columns 4s .. 4s + 4.
__device__ __forceinline__ void b_pairs(const uint32_t* x, int s, uint32_t& b0, uint32_t& b1) {
  b0 = __byte_perm(x[2 * s], x[2 * s + 1], 0x5410);
  b1 = __byte_perm(x[2 * s], x[2 * s + 1], 0x7632);
}

// Block = one 16-row tile of one segment; warp w takes chunks w, w + 8, ... of the row. Per piece,
// lane (g, t) multiplies its fields against activation row 8j + g of each n-tile j (batch column g
// of B; zero past n) into f32 sums c[j] (rows g, g + 8 × batch columns 2t, 2t + 1), then scales
// the chunk: y[j] += s · c[j]. A batch column's sums never see another column's activations and
// every sum is taken in a fixed order (steps, chunks, then the warps in order), the same for every
// NT: a row's result is the same bits alone or among 32.
template <int PB, bool Deep, int NT>
__global__ void __launch_bounds__(kThreads, Layout<PB, Deep, NT>::kMinBlocks)
    skinny_fp8_kernel(const __nv_bfloat16* __restrict__ x, int n, int64_t ldx, tile_blocks::Segments segs) {
  using L = Layout<PB, Deep, NT>;
  extern __shared__ float4 smem_raw[];
  float* red = reinterpret_cast<float*>(smem_raw);  // the warps' sums: [warp][j][e][lane] (kRedBytes<NT>)
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const auto [seg, wtile] = tile_blocks::place_of(segs);
  const QuantMatrix& m = seg.w;
  const int64_t row0 = wtile * kTileRows;
  // Rows past the weight read row 0 instead: each feeds only its own output row, never stored.
  const int64_t rg = row0 + g < m.rows ? row0 + g : 0, rh = row0 + g + 8 < m.rows ? row0 + g + 8 : 0;
  const int64_t k = m.cols;
  const uint8_t* wg = static_cast<const uint8_t*>(m.data) + rg * k;
  const uint8_t* wh = static_cast<const uint8_t*>(m.data) + rh * k;
  const float* sg_row = static_cast<const float*>(m.scales) + (m.row_offset + rg) / m.block_rows * m.scale_cols;
  const float* sh_row = static_cast<const float*>(m.scales) + (m.row_offset + rh) / m.block_rows * m.scale_cols;
  const int chunks = static_cast<int>((k + L::kChunk - 1) / L::kChunk);
  const int warp_steps = (chunks + kWarps - 1) / kWarps;  // the same for every warp (extra steps multiply zeros)
  const int chunks_per_tile = m.block_cols / L::kChunk;

  uint32_t next_g[L::kGroup][L::kWords], next_h[L::kGroup][L::kWords];
  float next_sg[L::kGroup], next_sh[L::kGroup];
  // Chunk of this lane's i-th step, and its piece's column (or -1 past the row).
  auto piece_col = [&](int i) -> int64_t {
    const int64_t c0 = static_cast<int64_t>(warp + i * kWarps) * L::kChunk + t * L::kElems;
    return c0 < k ? c0 : -1;
  };
  auto load_group = [&](int i0) {
#pragma unroll
    for (int u = 0; u < L::kGroup; ++u) {
      const int64_t c0 = i0 + u < warp_steps ? piece_col(i0 + u) : -1;
      if (c0 >= 0) {
        load_piece<PB>(wg + c0, next_g[u]);
        load_piece<PB>(wh + c0, next_h[u]);
        const int tc = (warp + (i0 + u) * kWarps) / chunks_per_tile;  // the chunk's tile column
        next_sg[u] = __ldg(sg_row + tc);
        next_sh[u] = __ldg(sh_row + tc);
      } else {
#pragma unroll
        for (int j = 0; j < L::kWords; ++j) next_g[u][j] = next_h[u][j] = 0;
        next_sg[u] = next_sh[u] = 0.0f;
      }
    }
  };
  load_group(0);  // weights never change: in flight before the wait on the kernel ahead
  chained_kernel_start();

  float y[NT][4] = {};
  for (int i0 = 0; i0 < warp_steps; i0 += L::kGroup) {
    uint32_t cur_g[L::kGroup][L::kWords], cur_h[L::kGroup][L::kWords];
    float sg[L::kGroup], sh[L::kGroup];
#pragma unroll
    for (int u = 0; u < L::kGroup; ++u) {
#pragma unroll
      for (int j = 0; j < L::kWords; ++j) cur_g[u][j] = next_g[u][j], cur_h[u][j] = next_h[u][j];
      sg[u] = next_sg[u], sh[u] = next_sh[u];
    }
    if (i0 + L::kGroup < warp_steps) load_group(i0 + L::kGroup);  // in flight while these are multiplied
#pragma unroll
    for (int u = 0; u < L::kGroup; ++u) {
      const int64_t c0 = i0 + u < warp_steps ? piece_col(i0 + u) : -1;
      // The piece's activations of each n-tile (row 8j + g; zeros past n or past the row).
      uint32_t xv[NT][L::kXWords];
#pragma unroll
      for (int j = 0; j < NT; ++j) {
        if (8 * j + g < n && c0 >= 0) {
          const __nv_bfloat16* xp = x + (8 * j + g) * ldx + c0;
          if constexpr (L::kXWords >= 4) {
#pragma unroll
            for (int w = 0; w < L::kXWords / 4; ++w) {
              const uint4 v = __ldg(reinterpret_cast<const uint4*>(xp) + w);
              xv[j][4 * w] = v.x, xv[j][4 * w + 1] = v.y, xv[j][4 * w + 2] = v.z, xv[j][4 * w + 3] = v.w;
            }
          } else {
            const uint2 v = __ldg(reinterpret_cast<const uint2*>(xp));
            xv[j][0] = v.x, xv[j][1] = v.y;
          }
        } else {
#pragma unroll
          for (int w = 0; w < L::kXWords; ++w) xv[j][w] = 0;
        }
      }
      float c[NT][4] = {};
#pragma unroll
      for (int s = 0; s < L::kSteps; ++s) {
        uint32_t g_lo, g_hi, h_lo, h_hi;
        step_pairs<PB>(cur_g[u], s, g_lo, g_hi);
        step_pairs<PB>(cur_h[u], s, h_lo, h_hi);
#pragma unroll
        for (int j = 0; j < NT; ++j) {
          uint32_t b0, b1;
          b_pairs(xv[j], s, b0, b1);
          mma_bf16_16816(c[j], g_lo, h_lo, g_hi, h_hi, b0, b1);
        }
      }
#pragma unroll
      for (int j = 0; j < NT; ++j) {
        y[j][0] = __fmaf_rn(sg[u], c[j][0], y[j][0]);
        y[j][1] = __fmaf_rn(sg[u], c[j][1], y[j][1]);
        y[j][2] = __fmaf_rn(sh[u], c[j][2], y[j][2]);
        y[j][3] = __fmaf_rn(sh[u], c[j][3], y[j][3]);
      }
    }
  }

  tile_blocks::finish<NT>(y, red, seg, row0, n);
}

// The deep form where the launch's blocks all fit the GPU at once, else the shallow one (more blocks
// resident: a launch of several waves, or one a little past what two blocks a multiprocessor hold,
// such as 27B's ffn down of 320 tiles on 132 multiprocessors, leaves a short last wave otherwise).
// The sums are the same in both, bit for bit. More rows (tile_blocks::n_tiles): the shallow form.
template <int PB, int NT>
void launch_tiles(const __nv_bfloat16* x, int n, int64_t ldx, const tile_blocks::Segments& segs, cudaStream_t stream) {
  const int64_t tiles = segs.first_tile[segs.count];
  const dim3 grid(static_cast<unsigned>(tiles));
  const int smem = tile_blocks::kRedBytes<NT>;
  auto kernel = skinny_fp8_kernel<PB, false, NT>;
  if constexpr (NT == 1)
    if (tiles <= tile_blocks::resident_blocks(reinterpret_cast<const void*>(skinny_fp8_kernel<PB, true, 1>), smem))
      kernel = skinny_fp8_kernel<PB, true, 1>;
  launch_chained(kernel, grid, dim3(kThreads), smem, stream, x, n, ldx, segs);
}

template <int PB>
void launch(const __nv_bfloat16* x, int n, int64_t ldx, const tile_blocks::Segments& segs, cudaStream_t stream) {
  switch (tile_blocks::n_tiles(n)) {
    case 1: launch_tiles<PB, 1>(x, n, ldx, segs, stream); break;
    case 2: launch_tiles<PB, 2>(x, n, ldx, segs, stream); break;
    default: launch_tiles<PB, 4>(x, n, ldx, segs, stream); break;
  }
}

}  // namespace

int skinny_fp8_piece_bytes(const QuantMatrix& m) {
  for (int pb : {16, 8, 4})
    if (m.block_cols % (4 * pb) == 0) return pb;
  fail("skinny_quant_gemm: FP8 tiles of ", m.block_cols, " columns (a multiple of 16 is needed)");
}

void skinny_quant_fp8(const __nv_bfloat16* x, int64_t n, int64_t ldx, std::span<const QuantSegment> segments, cudaStream_t stream) {
  if (n < 1 || n > kSkinnyQuantLaunchRows) fail("internal: ", n, " rows in one quantized launch");
  const int pb = skinny_fp8_piece_bytes(segments[0].w);
  for (const QuantSegment& s : segments)
    if (skinny_fp8_piece_bytes(s.w) != pb) fail("internal: FP8 weights of different piece sizes in one launch");
  const tile_blocks::Segments segs = tile_blocks::segments(segments);
  switch (pb) {
    case 16: launch<16>(x, static_cast<int>(n), ldx, segs, stream); break;
    case 8: launch<8>(x, static_cast<int>(n), ldx, segs, stream); break;
    default: launch<4>(x, static_cast<int>(n), ldx, segs, stream); break;
  }
  QWENRT_CUDA_CHECK_LAUNCH();
}

}  // namespace qwenrt::cuda
