// Decode-shaped products over MLX affine weights on the tensor cores (skinny_quant_gemm.h), on the
// tile skeleton of skinny_quant_tiles.cuh: a lane's piece is 16 bytes of a row (32 four-bit or 16
// eight-bit fields, inside one group: check_quant_matrix), each field dequantized in registers as
// fma(scale, q, bias) in f32 (quant_decode.cuh; q made f32 without an integer conversion), rounded
// to bf16 two at a time, and multiplied on the tensor cores with f32 sums. The weights are the
// values the prompt rows' dequantization gives (dequantize_rows: the same bf16 roundings), as
// transformers would hold the dequantized model in bf16; a row's result is the same bits alone or
// among 8. (The warp-per-row kernel that multiplied the exact f32 values in f32 streamed at a third
// of the copy bandwidth: a conversion, two fmas and the activations' widening per field.)
#include <cuda_bf16.h>

#include <cstdint>

#include "backend/cuda/ptx/mma.cuh"
#include "backend/cuda/quant/quant_decode.cuh"
#include "backend/cuda/quant/skinny_quant_kernels.h"
#include "backend/cuda/quant/skinny_quant_tiles.cuh"

namespace qwenrt::cuda {
namespace {

// Elements j and j + 1 of a piece as a bf16 pair (j the low half), each rounded once from its f32 value.
template <QuantKind K>
__device__ __forceinline__ uint32_t value_pair(const uint32_t (&w)[4], int j, float scale, float bias) {
  const __nv_bfloat162 p = __floats2bfloat162_rn(quant::piece_value<K>(w, j, scale, bias), quant::piece_value<K>(w, j + 1, scale, bias));
  return *reinterpret_cast<const uint32_t*>(&p);
}

template <QuantKind K>
struct Affine {
  static constexpr int kBytes = 16, kElems = quant::kPieceElements<K>, kGroup = 2;
  static constexpr int kSteps = kElems / 4;  // m16n8k16 products per piece: 4 columns of each row per lane
  struct Scales {
    float sg = 0.0f, bg = 0.0f, sh = 0.0f, bh = 0.0f;
  };
  struct Rows {
    const QuantMatrix& m;
    int64_t rg, rh;
    __device__ Rows(const QuantMatrix& matrix, int64_t g, int64_t h) : m(matrix), rg(g), rh(h) {}
    __device__ Scales scales(int, int64_t c0) const {
      Scales s;
      quant::piece_scale_bias<K>(m, rg, c0, s.sg, s.bg);
      quant::piece_scale_bias<K>(m, rh, c0, s.sh, s.bh);
      return s;
    }
  };
  // Step st takes columns 4st .. 4st + 3 of the piece: the pair (4st, 4st + 1) at the fragment's
  // columns 2t..2t+1 and (4st + 2, 4st + 3) at 2t+8..2t+9, with the activations' pairs in the same
  // places (xv[2st], xv[2st + 1]): the dot product is order-free in k.
  __device__ static void multiply(const uint32_t (&wg)[4], const uint32_t (&wh)[4], const Scales& s, const uint32_t* xv, float (&y)[4]) {
#pragma unroll
    for (int st = 0; st < kSteps; ++st) {
      const uint32_t g_lo = value_pair<K>(wg, 4 * st, s.sg, s.bg), g_hi = value_pair<K>(wg, 4 * st + 2, s.sg, s.bg);
      const uint32_t h_lo = value_pair<K>(wh, 4 * st, s.sh, s.bh), h_hi = value_pair<K>(wh, 4 * st + 2, s.sh, s.bh);
      mma_bf16_16816(y, g_lo, h_lo, g_hi, h_hi, xv[2 * st], xv[2 * st + 1]);
    }
  }
};

}  // namespace

void skinny_quant_affine(const __nv_bfloat16* x, int64_t n, int64_t ldx, std::span<const QuantSegment> segments, cudaStream_t stream) {
  const skinny_tiles::QuantSegments segs = skinny_tiles::gather(segments);
  // One launch per field width (a checkpoint's neighbouring weights share theirs).
  const QuantKind kind = segments[0].w.kind;
  for (const QuantSegment& s : segments)
    if (s.w.kind != kind) fail("internal: MLX affine weights of different field widths in one launch");
  if (kind == QuantKind::Affine4) return skinny_tiles::launch<Affine<QuantKind::Affine4>>(x, n, ldx, segs, stream);
  return skinny_tiles::launch<Affine<QuantKind::Affine8>>(x, n, ldx, segs, stream);
}

}  // namespace qwenrt::cuda
