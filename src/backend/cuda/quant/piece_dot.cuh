#pragma once
// The dot products of 16-byte pieces of quantized rows with bf16 activations, as the warp-per-row
// kernels take them (quant/skinny_quant_affine.cu, moe/moe_decode_packed.cu): each field
// dequantized with one rounding (quant_decode.cuh), multiplied into four f32 sums per activation
// row (element j into sum j mod 4, explicit fmas, in order), the sums finished in a fixed order
// and across the warp by a fixed butterfly. Nothing depends on the other rows: batch-invariant.
#include <cuda_bf16.h>

#include <cstdint>

#include "backend/cuda/ptx/mma.cuh"
#include "backend/cuda/quant/quant_decode.cuh"

namespace qwenrt::cuda {

// The 8 bf16 activations x[e .. e + 8) as f32 (element 2j is word j's low half).
__device__ __forceinline__ void load_x8(const __nv_bfloat16* p, float (&xv)[8]) {
  const uint4 u = load_shared16(p);
  const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    xv[2 * j] = quant::bits_to_f32(w[j] << 16);
    xv[2 * j + 1] = quant::bits_to_f32(w[j] & 0xffff0000u);
  }
}

// acc[b][j mod 4] += x_b[e + j] · wv[j] for j = 0..7, in order.
template <int NR>
__device__ __forceinline__ void dot8(const float (&wv)[8], const __nv_bfloat16* x, int64_t ldx, int64_t e, float (&acc)[NR][4]) {
#pragma unroll
  for (int b = 0; b < NR; ++b) {
    float xv[8];
    load_x8(x + b * ldx + e, xv);
#pragma unroll
    for (int j = 0; j < 8; ++j) acc[b][j & 3] = __fmaf_rn(xv[j], wv[j], acc[b][j & 3]);
  }
}

// One 16-byte piece of row r starting at element e0 (all of it inside one affine group or FP8
// tile: check_quant_matrix), dequantized (quant_decode.cuh, as the CPU test checks it) and
// multiplied into acc, 8 elements at a time.
template <QuantKind K, int NR>
__device__ __forceinline__ void piece(const QuantMatrix& m, int64_t r, int64_t e0, uint4 q, const __nv_bfloat16* x, int64_t ldx,
                                      float (&acc)[NR][4]) {
  const uint32_t w[4] = {q.x, q.y, q.z, q.w};
  float scale, bias;
  quant::piece_scale_bias<K>(m, r, e0, scale, bias);
#pragma unroll
  for (int o = 0; o < quant::kPieceElements<K> / 8; ++o) {
    float wv[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) wv[j] = quant::piece_value<K>(w, 8 * o + j, scale, bias);
    dot8<NR>(wv, x, ldx, e0 + 8 * o, acc);
  }
}

// The four sums of a lane added in a fixed order, then across the warp by a fixed butterfly.
__device__ __forceinline__ float warp_sum(const float (&acc)[4]) {
  float v = __fadd_rn(__fadd_rn(acc[0], acc[1]), __fadd_rn(acc[2], acc[3]));
#pragma unroll
  for (int off = 16; off > 0; off /= 2) v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, off));
  return v;
}

}  // namespace qwenrt::cuda
