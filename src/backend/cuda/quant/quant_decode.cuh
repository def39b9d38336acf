#pragma once
// The value of one element of a QuantMatrix, on the host and the device alike: the kernels
// (skinny_quant_gemm, dequantize_rows, embed_quant_rows) decode through these functions, and a CPU
// test checks them against the CPU's own dequantization (Weight::row_to_f32) element by element.
// Every value is computed with one explicit rounding (fma or multiply), as the CPU does, so the
// two agree bit for bit.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#include "backend/cuda/quant/affine_tiles.h"
#include "backend/cuda/quant/quant_matrix.h"

namespace qwenrt::cuda::quant {

__host__ __device__ inline float bits_to_f32(uint32_t u) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, 4);
  return f;
#endif
}

__host__ __device__ inline float fma_rn(float a, float b, float c) {
#ifdef __CUDA_ARCH__
  return __fmaf_rn(a, b, c);
#else
  return std::fma(a, b, c);
#endif
}

__host__ __device__ inline float mul_rn(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}

// bf16 and f16 bits widened to f32 (exact).
__host__ __device__ inline float bf16_bits_to_f32(uint16_t h) { return bits_to_f32(static_cast<uint32_t>(h) << 16); }
__host__ __device__ inline float f16_bits_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
  if (exp == 0x1f) return bits_to_f32(sign | 0x7f800000u | (man << 13));  // inf, NaN
  if (exp != 0) return bits_to_f32(sign | ((exp + 112u) << 23) | (man << 13));
  // Subnormal: man · 2^-24, exact in f32.
  const float v = static_cast<float>(man) * 5.9604644775390625e-8f;
  return sign ? -v : v;
}

// The value of one float8 e4m3fn byte (exact in f32). The NaN codes 0x7f/0xff read as ±480, as the
// CPU reads them (backend/weight.h fp8_e4m3_to_f32).
__host__ __device__ inline float e4m3_to_f32(uint32_t q) {
  const uint32_t sign = (q & 0x80u) << 24, exp = (q >> 3) & 0xfu, man = q & 0x7u;
  if (exp != 0) return bits_to_f32(sign | ((exp + 120u) << 23) | (man << 20));
  const float v = static_cast<float>(man) * 0.001953125f;  // subnormal: man · 2^-9
  return sign ? -v : v;
}

// Scale or bias i of an affine matrix's table, widened to f32.
__host__ __device__ inline float load_scale(const void* table, QuantScale type, int64_t i) {
  switch (type) {
    case QuantScale::F32: return static_cast<const float*>(table)[i];
    case QuantScale::F16: return f16_bits_to_f32(static_cast<const uint16_t*>(table)[i]);
    default: return bf16_bits_to_f32(static_cast<const uint16_t*>(table)[i]);
  }
}

// Affine: fma(scale, q, bias), as Weight::row_to_f32.
__host__ __device__ inline float affine_value(uint32_t q, float scale, float bias) { return fma_rn(scale, static_cast<float>(q), bias); }

// FP8: e4m3(q) · scale in one rounding, as Weight::row_to_f32.
__host__ __device__ inline float fp8_value(uint32_t q, float scale) { return mul_rn(e4m3_to_f32(q), scale); }

// The quantized field of element c of row r (host or device memory that this side can read), in
// rows or in tensor-core tiles (affine_tiles.h).
__host__ __device__ inline uint32_t field(const QuantMatrix& m, int64_t r, int64_t c) {
  if (m.tiled) {  // a nibble per plane (affine_tiles.h)
    const int bits = m.container_bits();
    uint32_t q = 0;
    for (int plane = 0; plane < affine_tiles::planes(bits); ++plane) {
      const affine_tiles::NibbleAt at = affine_tiles::nibble_at(m.cols, bits, r, c, plane);
      q |= ((static_cast<const uint8_t*>(m.data)[at.byte] >> at.shift) & 0xfu) << (4 * plane);
    }
    return q;
  }
  const auto* row = static_cast<const uint8_t*>(m.data) + r * m.row_bytes();
  if (m.kind == QuantKind::Affine4) return (row[c >> 1] >> ((c & 1) * 4)) & 0xfu;
  return row[c];
}

// The FP8 tile scale of row r, column c.
__host__ __device__ inline float fp8_scale(const QuantMatrix& m, int64_t r, int64_t c) {
  return static_cast<const float*>(m.scales)[(m.row_offset + r) / m.block_rows * m.scale_cols + c / m.block_cols];
}

// Element (r, c) of the matrix in f32.
__host__ __device__ inline float element(const QuantMatrix& m, int64_t r, int64_t c) {
  const uint32_t q = field(m, r, c);
  if (m.kind == QuantKind::Fp8) return fp8_value(q, fp8_scale(m, r, c));
  const int64_t groups = m.cols / m.group_size;
  if (m.tiled) {  // scale and bias side by side in the tiles' table
    const int64_t i = affine_tiles::scale_index(groups, r, c / m.group_size);
    return affine_value(q, load_scale(m.scales, m.scale_type, i), load_scale(m.scales, m.scale_type, i + 1));
  }
  const int64_t g = r * groups + c / m.group_size;
  return affine_value(q, load_scale(m.scales, m.scale_type, g), load_scale(m.biases, m.scale_type, g));
}

// ---- 16-byte pieces, as the row-major decode kernels read them --------------------------------
// A row is read in 16-byte pieces (four little-endian words): piece i holds elements
// [i · elements, (i + 1) · elements) with elements = 32 (Affine4) or 16 (Affine8, Fp8), all inside
// one affine group or FP8 tile (check_quant_matrix).

template <QuantKind K>
inline constexpr int kPieceElements = K == QuantKind::Affine4 ? 32 : 16;

// The scale (and affine bias) of the piece of row r that starts at element e0.
template <QuantKind K>
__host__ __device__ inline void piece_scale_bias(const QuantMatrix& m, int64_t r, int64_t e0, float& scale, float& bias) {
  if constexpr (K == QuantKind::Fp8) {
    scale = fp8_scale(m, r, e0);
    bias = 0.0f;
  } else {
    // Group sizes are 32, 64 or 128 (check_quant_matrix): shifts, not 64-bit divisions, per piece.
    const int shift = m.group_size == 32 ? 5 : m.group_size == 64 ? 6 : 7;
    const int64_t g = r * (m.cols >> shift) + (e0 >> shift);
    scale = load_scale(m.scales, m.scale_type, g);
    bias = load_scale(m.biases, m.scale_type, g);
  }
}

// Byte k of v as an exact f32, without an integer conversion (a quarter-rate instruction on the
// GPU, which bounded the 4-bit decode kernel): the bits 0x4B0000qq are the float 2^23 + q, and taking
// 2^23 off is exact. On the GPU (and in tools/cuda_emu) the byte moves with one PRMT.
__host__ __device__ inline float byte_to_f32(uint32_t v, int k) {
#if defined(__CUDA_ARCH__) || defined(QWENRT_CUDA_EMU)
  return __fsub_rn(__uint_as_float(__byte_perm(v, 0x4B000000u, 0x7440u | static_cast<uint32_t>(k))), 8388608.0f);
#else
  return bits_to_f32(((v >> (8 * k)) & 0xffu) | 0x4B000000u) - 8388608.0f;
#endif
}

// A field q < 256 as an exact f32 the same way, from its bits under 2^23's.
__host__ __device__ inline float field_to_f32(uint32_t q) { return bits_to_f32(q | 0x4B000000u) - 8388608.0f; }

// The value of element j of a piece whose words are w. Four-bit fields: the even nibbles of a word
// are the bytes of w & 0x0F0F0F0F, the odd ones those of (w >> 4) & 0x0F0F0F0F (shared by the
// unrolled callers' eight elements of a word).
template <QuantKind K>
__host__ __device__ inline float piece_value(const uint32_t (&w)[4], int j, float scale, float bias) {
  if constexpr (K == QuantKind::Affine4) {
    const uint32_t v = w[j / 8], nibbles = (j % 2 == 0 ? v : v >> 4) & 0x0F0F0F0Fu;
    return fma_rn(scale, byte_to_f32(nibbles, (j % 8) / 2), bias);
  } else if constexpr (K == QuantKind::Affine8) {
    return fma_rn(scale, byte_to_f32(w[j / 4], j % 4), bias);
  } else {
    return fp8_value((w[j / 4] >> (8 * (j % 4))) & 0xffu, scale);
  }
}

// ---- bf16 pairs, as the tensor-core FP8 decode kernel (skinny_quant_fp8) makes them -----------
// Exact bf16 values from a few bit operations, no conversion; a CPU test checks every code.

// The e4m3 bytes 0 and 2 (fp8_pair_02) or 1 and 3 (fp8_pair_13) of v as bf16 pairs worth 2^-120
// times their values, subnormals and the NaN codes (read as ±480, as e4m3_to_f32) included: the
// sign to bf16's sign, the 7 other bits under bf16's low exponent and top mantissa bits.
__host__ __device__ inline uint32_t fp8_pair_02(uint32_t v) { return ((v << 4) & 0x07F007F0u) | ((v << 8) & 0x80008000u); }
__host__ __device__ inline uint32_t fp8_pair_13(uint32_t v) { return ((v >> 4) & 0x07F007F0u) | (v & 0x80008000u); }
constexpr uint16_t kBf16Two120 = 0x7B80;  // 2^120: an FP8 pair times this is its values, exact

}  // namespace qwenrt::cuda::quant
