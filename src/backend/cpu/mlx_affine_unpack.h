#pragma once
// Reading MLX affine packed rows: scales/biases in their dense format, one element's field, and
// (AVX2) eight elements as int32 lanes. Shared by the row kernels (matmul_mlx_affine.cpp) and the
// blocked prompt-window kernels (matmul_blocked_mlx_affine.cpp) so both dequantize identically.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "backend/weight.h"
#include "core/half.h"

namespace qwenrt::cpu::mlx_affine {

inline float load_scale(WeightFormat f, const std::byte* p, int64_t i) {
  switch (f) {
    case WeightFormat::F32: {
      float v;
      std::memcpy(&v, p + 4 * i, 4);
      return v;
    }
    case WeightFormat::F16: {
      uint16_t h;
      std::memcpy(&h, p + 2 * i, 2);
      return f16_to_f32(h);
    }
    default: {
      uint16_t h;
      std::memcpy(&h, p + 2 * i, 2);
      return bf16_to_f32(h);
    }
  }
}

// Element c of a packed row: the `bits`-wide field at bit c·bits, LSB first.
inline uint32_t extract(const uint8_t* row, int64_t c, int bits) {
  const int64_t bit = c * bits;
  const int sh = static_cast<int>(bit & 7);
  uint32_t v = row[bit >> 3];
  if (sh + bits > 8) v |= static_cast<uint32_t>(row[(bit >> 3) + 1]) << 8;
  return (v >> sh) & ((1u << bits) - 1);
}

// The 8 quantized values of elements [c, c + 8) of a packed row, as int32 lanes.
template <int B>
__attribute__((target("avx2,fma,f16c"))) inline __m256i unpack8(const uint8_t* row, int64_t c) {
  const uint8_t* p = row + c * B / 8;  // c is a multiple of 8: the 8 elements start on a byte
  if constexpr (B == 8) {
    return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  } else if constexpr (B == 4) {
    uint32_t word;
    std::memcpy(&word, p, 4);
    const __m256i v = _mm256_srlv_epi32(_mm256_set1_epi32(static_cast<int>(word)), _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28));
    return _mm256_and_si256(v, _mm256_set1_epi32(0xF));
  } else if constexpr (B == 2) {
    uint16_t half;
    std::memcpy(&half, p, 2);
    const __m256i v = _mm256_srlv_epi32(_mm256_set1_epi32(half), _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14));
    return _mm256_and_si256(v, _mm256_set1_epi32(0x3));
  } else {  // 3, 5, 6: the 8 elements fill B bytes; shift a 64-bit copy per element
    uint64_t word = 0;
    std::memcpy(&word, p, B);
    const __m256i v = _mm256_set1_epi64x(static_cast<long long>(word));
    const __m256i lo = _mm256_srlv_epi64(v, _mm256_setr_epi64x(0, B, 2 * B, 3 * B));
    const __m256i hi = _mm256_srlv_epi64(v, _mm256_setr_epi64x(4 * B, 5 * B, 6 * B, 7 * B));
    const __m256i pick = _mm256_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6);
    const __m256i both = _mm256_blend_epi32(_mm256_permutevar8x32_epi32(lo, pick), _mm256_permutevar8x32_epi32(hi, pick), 0xF0);
    return _mm256_and_si256(both, _mm256_set1_epi32((1 << B) - 1));
  }
}

// 4-bit fields in the position order of mlx_affine_spans.h: the two nibble planes of 64 fields
// (32 bytes; `half`: only the first 16 are the row's, the rest read as zero fields), and positions
// 8t .. 8t + 7 of the block as int32 lanes, by a byte shuffle that spreads bytes 4(t % 4) ..
// 4(t % 4) + 3 of each 128-bit half of plane t / 4 into its four 32-bit lanes.
struct NibbleSpread {
  alignas(32) int8_t m[4][32];
  constexpr NibbleSpread() : m{} {
    for (int t = 0; t < 4; ++t)
      for (int i = 0; i < 32; ++i) m[t][i] = (i % 4 == 0) ? static_cast<int8_t>(4 * t + (i % 16) / 4) : int8_t{-128};
  }
};
inline constexpr NibbleSpread kNibbleSpread;

struct NibblePlanes {
  __m256i plane[2];
};

__attribute__((target("avx2,fma,f16c"))) inline NibblePlanes nibble_planes(const uint8_t* src, bool half) {
  const __m256i raw = half ? _mm256_zextsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src)))
                           : _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src));
  const __m256i low = _mm256_set1_epi8(0x0F);
  return {{_mm256_and_si256(raw, low), _mm256_and_si256(_mm256_srli_epi16(raw, 4), low)}};
}

__attribute__((target("avx2,fma,f16c"))) inline __m256i nibble_lanes(const NibblePlanes& n, int t) {
  return _mm256_shuffle_epi8(n.plane[t / 4], _mm256_load_si256(reinterpret_cast<const __m256i*>(kNibbleSpread.m[t % 4])));
}

}  // namespace qwenrt::cpu::mlx_affine
