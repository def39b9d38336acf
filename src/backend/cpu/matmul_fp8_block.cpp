// Products over block-scaled FP8 weights (float8 e4m3fn, one scale per [block_rows, block_cols]
// tile): each weight byte is decoded in registers and scaled, w = e4m3(q) · scale in f32 (exactly
// what Weight::row_to_f32 gives), then multiplied into 8 interleaved partial sums per (x row,
// weight row) in the order of the dense kernels: a product equals the dense product over the
// dequantized matrix bit for bit. The AVX2 kernel and its scalar twin agree bit for bit, and every
// sum is independent of the batch and of the row range a thread takes.
//
// Decoding: the e4m3 bits moved into an f16 (sign to bit 15, exponent and mantissa to bits 13..7)
// are the value / 256 exactly, subnormals included, so F16C converts 8 at a time and the tile's
// scale is taken as 256 · scale (exact: the loader bounds scales far below overflow), giving the
// same single rounding as e4m3(q) · scale.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "backend/cpu/matmul_formats.h"
#include "backend/cpu/matmul_row_blocking.h"
#include "core/error.h"
#include "core/half.h"

namespace qwenrt::cpu {

namespace {

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

template <WeightFormat S>
void rows_scalar(const float* x, int64_t n, int64_t k, const Weight& w, float* y, int64_t ldy, int64_t r0, int64_t r1) {
  const int64_t bc = w.fp8.block_cols, k8 = k / 8 * 8;
  std::vector<float> wrow(static_cast<std::size_t>(k));
  for (int64_t r = r0; r < r1; ++r) {
    const auto* row = reinterpret_cast<const uint8_t*>(w.data + static_cast<std::size_t>(r) * w.row_bytes());
    for (int64_t c = 0; c < k; ++c) wrow[static_cast<std::size_t>(c)] = f16_to_f32(e4m3_as_f16_over_256(row[c])) * scaled_256<S>(w, r, c / bc);
    for (int64_t i = 0; i < n; ++i) {
      const float* xr = x + i * k;
      float l[8] = {};
      for (int64_t c = 0; c < k8; c += 8)
        for (int j = 0; j < 8; ++j) l[j] = std::fma(xr[c + j], wrow[static_cast<std::size_t>(c + j)], l[j]);
      float s = ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]));  // the order of hsum8 below
      for (int64_t c = k8; c < k; ++c) s = std::fma(xr[c], wrow[static_cast<std::size_t>(c)], s);
      y[i * ldy + r] = s;
    }
  }
}

// ---- AVX2 + FMA + F16C kernel ----------------------------------------------------------------
#define QWENRT_AVX2 __attribute__((target("avx2,fma,f16c")))

// Elements [c, c + 8) of an FP8 row as f32 value / 256.
QWENRT_AVX2 inline __m256 decode8(const uint8_t* row, int64_t c) {
  const __m128i v = _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(row + c)));
  const __m128i sign = _mm_and_si128(_mm_slli_epi16(v, 8), _mm_set1_epi16(static_cast<short>(0x8000)));
  const __m128i rest = _mm_and_si128(_mm_slli_epi16(v, 7), _mm_set1_epi16(0x3f80));
  return _mm256_cvtph_ps(_mm_or_si128(sign, rest));
}

QWENRT_AVX2 inline float hsum8(__m256 v) {
  __m128 a = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  __m128 b = _mm_add_ps(a, _mm_movehl_ps(a, a));
  __m128 c = _mm_add_ss(b, _mm_shuffle_ps(b, b, 1));
  return _mm_cvtss_f32(c);
}

// A register tile: NX rows of x against NW weight rows, full depth k.
template <WeightFormat S, int NX, int NW>
QWENRT_AVX2 void tile(const float* x, int64_t k, const Weight& w, int64_t r, float* y, int64_t ldy) {
  const std::size_t stride = w.row_bytes();
  const int64_t bc = w.fp8.block_cols, k8 = k / 8 * 8;
  const uint8_t* rows[NW];
  for (int j = 0; j < NW; ++j) rows[j] = reinterpret_cast<const uint8_t*>(w.data + static_cast<std::size_t>(r + j) * stride);
  __m256 acc[NX][NW];
  for (int i = 0; i < NX; ++i)
    for (int j = 0; j < NW; ++j) acc[i][j] = _mm256_setzero_ps();
  for (int64_t cb = 0; cb * bc < k8; ++cb) {
    __m256 sv[NW];
    for (int j = 0; j < NW; ++j) sv[j] = _mm256_set1_ps(scaled_256<S>(w, r + j, cb));
    const int64_t c_end = std::min(k8, (cb + 1) * bc);
    for (int64_t c = cb * bc; c < c_end; c += 8) {
      if constexpr (NX == 1) {  // decode: fetch the next tile's rows while this one runs (as the dense kernel)
        if (c % 64 == 0)
          for (int j = 0; j < NW; ++j) _mm_prefetch(reinterpret_cast<const char*>(rows[j] + NW * stride + c), _MM_HINT_T0);
      }
      __m256 wv[NW];
      for (int j = 0; j < NW; ++j) wv[j] = _mm256_mul_ps(decode8(rows[j], c), sv[j]);
      for (int i = 0; i < NX; ++i) {
        const __m256 xv = _mm256_loadu_ps(x + i * k + c);
        for (int j = 0; j < NW; ++j) acc[i][j] = _mm256_fmadd_ps(xv, wv[j], acc[i][j]);
      }
    }
  }
  for (int i = 0; i < NX; ++i)
    for (int j = 0; j < NW; ++j) {
      float s = hsum8(acc[i][j]);
      for (int64_t c = k8; c < k; ++c) s = std::fma(x[i * k + c], f16_to_f32(e4m3_as_f16_over_256(rows[j][c])) * scaled_256<S>(w, r + j, c / bc), s);
      y[i * ldy + j] = s;
    }
}

// Rows [r0, r1) of W against all n rows of x (backend/cpu/matmul_row_blocking.h).
template <WeightFormat S>
QWENRT_AVX2 void rows_avx2(const float* x, int64_t n, int64_t k, const Weight& w, float* y, int64_t ldy, int64_t r0, int64_t r1) {
  for_each_row_tile(n, k, r0, r1, [&]<int NX, int NW>(int64_t i, int64_t r) { tile<S, NX, NW>(x + i * k, k, w, r, y + i * ldy + r, ldy); });
}

void check(const Weight& w, int64_t k) {
  if (w.fp8.block_cols <= 0 || w.fp8.block_cols % 8 != 0 || w.fp8.block_rows <= 0)
    fail("internal: FP8 matrix with blocks ", w.fp8.block_rows, "x", w.fp8.block_cols, " (columns must be a positive multiple of 8)");
  if (w.cols != k) fail("internal: FP8 matrix with ", w.cols, " columns used with ", k, " inputs");
}

}  // namespace

void fp8_block_rows_scalar(const float* x, int64_t n, int64_t k, const Weight& w, float* y, int64_t ldy, int64_t r0, int64_t r1) {
  check(w, k);
  switch (w.fp8.scale_format) {
    case WeightFormat::F32: return rows_scalar<WeightFormat::F32>(x, n, k, w, y, ldy, r0, r1);
    case WeightFormat::F16: return rows_scalar<WeightFormat::F16>(x, n, k, w, y, ldy, r0, r1);
    default: return rows_scalar<WeightFormat::BF16>(x, n, k, w, y, ldy, r0, r1);
  }
}

void fp8_block_rows(const float* x, int64_t n, int64_t k, const Weight& w, float* y, int64_t ldy, int64_t r0, int64_t r1) {
  if (!have_avx2()) return fp8_block_rows_scalar(x, n, k, w, y, ldy, r0, r1);
  check(w, k);
  switch (w.fp8.scale_format) {
    case WeightFormat::F32: return rows_avx2<WeightFormat::F32>(x, n, k, w, y, ldy, r0, r1);
    case WeightFormat::F16: return rows_avx2<WeightFormat::F16>(x, n, k, w, y, ldy, r0, r1);
    default: return rows_avx2<WeightFormat::BF16>(x, n, k, w, y, ldy, r0, r1);
  }
}

}  // namespace qwenrt::cpu
