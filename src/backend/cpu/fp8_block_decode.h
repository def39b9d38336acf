#pragma once
// Reading block-scaled FP8 rows (weight.h BlockFp8): the tile scales in their format, and e4m3
// bytes as f32. Shared by the row kernels (matmul_fp8_block.cpp) and the blocked prompt-window
// kernels (matmul_blocked_fp8_block.cpp) so both dequantize identically.
//
// Decoding: the e4m3 bits moved into an f16 (sign to bit 15, exponent and mantissa to bits 13..7)
// are the value / 256 exactly, subnormals included, so F16C converts 8 at a time and the tile's
// scale is taken as 256 · scale (exact: the loader bounds scales far below overflow), giving the
// same single rounding as e4m3(q) · scale.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "backend/weight.h"
#include "core/error.h"
#include "core/half.h"

namespace qwenrt::cpu::fp8_block {

// The layout every FP8 kernel assumes: column blocks a positive multiple of 8 (an 8-column step
// never straddles two scales), k the matrix's columns.
inline void check(const Weight& w, int64_t k) {
  if (w.fp8.block_cols <= 0 || w.fp8.block_cols % 8 != 0 || w.fp8.block_rows <= 0)
    fail("internal: FP8 matrix with blocks ", w.fp8.block_rows, "x", w.fp8.block_cols, " (columns must be a positive multiple of 8)");
  if (w.cols != k) fail("internal: FP8 matrix with ", w.cols, " columns used with ", k, " inputs");
}

template <WeightFormat S>
inline float load_scale(const std::byte* p, int64_t i) {
  if constexpr (S == WeightFormat::F32) {
    float v;
    std::memcpy(&v, p + 4 * i, 4);
    return v;
  } else {
    uint16_t h;
    std::memcpy(&h, p + 2 * i, 2);
    return S == WeightFormat::BF16 ? bf16_to_f32(h) : f16_to_f32(h);
  }
}

// 256 · the scale of row r's column block cb (r counted in the view).
template <WeightFormat S>
inline float scaled_256(const Weight& w, int64_t r, int64_t cb) {
  return 256.0f * load_scale<S>(w.fp8.scales, (w.fp8.row_offset + r) / w.fp8.block_rows * w.fp8.scale_cols + cb);
}

// e4m3 byte → the f16 bits of its value / 256.
inline uint16_t e4m3_as_f16_over_256(uint8_t q) { return static_cast<uint16_t>(((q & 0x80u) << 8) | ((q & 0x7fu) << 7)); }

// Row r's element c (r in the view), as every FP8 kernel computes it.
template <WeightFormat S>
inline float element(const Weight& w, int64_t r, int64_t c) {
  const auto* row = reinterpret_cast<const uint8_t*>(w.data + static_cast<std::size_t>(r) * w.row_bytes());
  return f16_to_f32(e4m3_as_f16_over_256(row[c])) * scaled_256<S>(w, r, c / w.fp8.block_cols);
}

// Elements [c, c + 8) of an FP8 row as f32 value / 256.
__attribute__((target("avx2,fma,f16c"))) inline __m256 decode8(const uint8_t* row, int64_t c) {
  const __m128i v = _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(row + c)));
  const __m128i sign = _mm_and_si128(_mm_slli_epi16(v, 8), _mm_set1_epi16(static_cast<short>(0x8000)));
  const __m128i rest = _mm_and_si128(_mm_slli_epi16(v, 7), _mm_set1_epi16(0x3f80));
  return _mm256_cvtph_ps(_mm_or_si128(sign, rest));
}

}  // namespace qwenrt::cpu::fp8_block
