// Decode-shaped products over block-FP8 weights on the tensor cores (skinny_quant_gemm.h), on the
// tile skeleton of skinny_quant_tiles.cuh: each e4m3 byte made an exact bf16 value by bit moves
// (quant_decode.cuh fp8_pair_*, times 2^120), m16n8k16 products with f32 sums, each tile column's
// sums scaled once. No weight is rounded; a row's result is the same bits alone or among 8.
#include <cuda_bf16.h>

#include <cstdint>

#include "backend/cuda/ptx/mma.cuh"
#include "backend/cuda/quant/quant_decode.cuh"
#include "backend/cuda/quant/skinny_quant_kernels.h"
#include "backend/cuda/quant/skinny_quant_tiles.cuh"
#include "core/error.h"

namespace qwenrt::cuda {
namespace {

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

// Block FP8 on the tile skeleton: a lane's piece is PB e4m3 bytes, all inside one FP8 tile column
// (the four lanes' chunk too: piece_bytes()), so each piece's sums c are scaled once: y += s · c.
template <int PB>
struct Fp8 {
  static constexpr int kBytes = PB, kElems = PB, kGroup = PB == 16 ? 2 : 4;
  static constexpr int kSteps = kElems / 4;  // m16n8k16 products per piece
  struct Scales {
    float g = 0.0f, h = 0.0f;
  };
  struct Rows {
    const float *sg_row, *sh_row;
    int chunks_per_tile;
    __device__ Rows(const QuantMatrix& m, int64_t rg, int64_t rh)
        : sg_row(static_cast<const float*>(m.scales) + (m.row_offset + rg) / m.block_rows * m.scale_cols),
          sh_row(static_cast<const float*>(m.scales) + (m.row_offset + rh) / m.block_rows * m.scale_cols),
          chunks_per_tile(m.block_cols / (4 * kElems)) {}
    __device__ Scales scales(int chunk, int64_t) const {
      const int tc = chunk / chunks_per_tile;  // the chunk's tile column
      return {__ldg(sg_row + tc), __ldg(sh_row + tc)};
    }
  };
  __device__ static void multiply(const uint32_t (&wg)[PB / 4], const uint32_t (&wh)[PB / 4], const Scales& s, const uint32_t* xv, float (&y)[4]) {
    float c[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
    for (int st = 0; st < kSteps; ++st) {
      uint32_t b0, b1, g_lo, g_hi, h_lo, h_hi;
      b_pairs(xv, st, b0, b1);
      step_pairs<PB>(wg, st, g_lo, g_hi);
      step_pairs<PB>(wh, st, h_lo, h_hi);
      mma_bf16_16816(c, g_lo, h_lo, g_hi, h_hi, b0, b1);
    }
    y[0] = __fmaf_rn(s.g, c[0], y[0]);
    y[1] = __fmaf_rn(s.g, c[1], y[1]);
    y[2] = __fmaf_rn(s.h, c[2], y[2]);
    y[3] = __fmaf_rn(s.h, c[3], y[3]);
  }
};

}  // namespace

int skinny_fp8_piece_bytes(const QuantMatrix& m) {
  for (int pb : {16, 8, 4})
    if (m.block_cols % (4 * pb) == 0) return pb;
  fail("skinny_quant_gemm: FP8 tiles of ", m.block_cols, " columns (a multiple of 16 is needed)");
}

void skinny_quant_fp8(const __nv_bfloat16* x, int64_t n, int64_t ldx, std::span<const QuantSegment> segments, cudaStream_t stream) {
  const int pb = skinny_fp8_piece_bytes(segments[0].w);
  for (const QuantSegment& s : segments)
    if (skinny_fp8_piece_bytes(s.w) != pb) fail("internal: FP8 weights of different piece sizes in one launch");
  const skinny_tiles::QuantSegments segs = skinny_tiles::gather(segments);
  switch (pb) {
    case 16: return skinny_tiles::launch<Fp8<16>>(x, n, ldx, segs, stream);
    case 8: return skinny_tiles::launch<Fp8<8>>(x, n, ldx, segs, stream);
    default: return skinny_tiles::launch<Fp8<4>>(x, n, ldx, segs, stream);
  }
}

}  // namespace qwenrt::cuda
