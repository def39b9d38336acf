// Products over dense weights (f32, f16, bf16): the AVX2/FMA/F16C kernel and its scalar twin,
// which round the same way.
#include <cpuid.h>
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "backend/cpu/lane_sum.h"
#include "backend/cpu/matmul_formats.h"
#include "backend/cpu/matmul_row_blocking.h"
#include "core/error.h"
#include "core/half.h"

namespace qwenrt::cpu {

namespace {

// ---- scalar reference kernel (any x86-64) --------------------------------------------------
// Accumulates in 8 interleaved partial sums like the SIMD kernel, so both paths round the same way.
template <typename Load>
void dot_rows_scalar(const float* x, int64_t n, int64_t k, const std::byte* w_row, float* y, int64_t ldy, Load load) {
  const int64_t k8 = k / 8 * 8;
  for (int64_t i = 0; i < n; ++i) {
    const float* xr = x + i * k;
    float lanes[8] = {};
    for (int64_t c = 0; c < k8; c += 8)
      for (int l = 0; l < 8; ++l) lanes[l] = std::fma(xr[c + l], load(w_row, c + l), lanes[l]);
    // Fixed pairwise order, mirrored by hsum8 below.
    float s = ((lanes[0] + lanes[4]) + (lanes[2] + lanes[6])) + ((lanes[1] + lanes[5]) + (lanes[3] + lanes[7]));
    for (int64_t c = k8; c < k; ++c) s = std::fma(xr[c], load(w_row, c), s);
    y[i * ldy] = s;
  }
}

float load_f32(const std::byte* p, int64_t c) {
  float f;
  std::memcpy(&f, p + 4 * c, 4);
  return f;
}
float load_bf16(const std::byte* p, int64_t c) {
  uint16_t h;
  std::memcpy(&h, p + 2 * c, 2);
  return bf16_to_f32(h);
}
float load_f16(const std::byte* p, int64_t c) {
  uint16_t h;
  std::memcpy(&h, p + 2 * c, 2);
  return f16_to_f32(h);
}

void rows_scalar(const float* x, int64_t n, int64_t k, const Weight& w, float* y, int64_t ldy, int64_t r0, int64_t r1) {
  for (int64_t r = r0; r < r1; ++r) {
    const std::byte* row = w.data + static_cast<std::size_t>(r) * w.row_bytes();
    switch (w.format) {
      case WeightFormat::BF16: dot_rows_scalar(x, n, k, row, y + r, ldy, load_bf16); break;
      case WeightFormat::F16: dot_rows_scalar(x, n, k, row, y + r, ldy, load_f16); break;
      default: dot_rows_scalar(x, n, k, row, y + r, ldy, load_f32); break;
    }
  }
}

// ---- AVX2 + FMA kernel ----------------------------------------------------------------------
#define QWENRT_AVX2 __attribute__((target("avx2,fma,f16c")))

template <WeightFormat T>
QWENRT_AVX2 inline __m256 load8(const std::byte* p, int64_t c) {
  if constexpr (T == WeightFormat::BF16) {
    __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2 * c));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  } else if constexpr (T == WeightFormat::F16) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2 * c)));
  } else {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(p + 4 * c));
  }
}

template <WeightFormat T>
QWENRT_AVX2 inline float load1(const std::byte* p, int64_t c) {
  if constexpr (T == WeightFormat::BF16) return load_bf16(p, c);
  else if constexpr (T == WeightFormat::F16) return load_f16(p, c);
  else return load_f32(p, c);
}

// Same order as the scalar kernel: (l0+l4)+(l2+l6) + (l1+l5)+(l3+l7).
// A register tile: NX rows of x against NW weight rows, full depth k.
template <WeightFormat T, int NX, int NW>
QWENRT_AVX2 void tile(const float* x, int64_t k, const std::byte* w, std::size_t w_stride, float* y, int64_t ldy) {
  __m256 acc[NX][NW];
  for (int i = 0; i < NX; ++i)
    for (int j = 0; j < NW; ++j) acc[i][j] = _mm256_setzero_ps();
  const int64_t k8 = k / 8 * 8;
  constexpr int64_t kElem = T == WeightFormat::F32 ? 4 : 2;
  for (int64_t c = 0; c < k8; c += 8) {
    // Decode: each weight row is a short stream (a few KB) that the hardware prefetcher barely
    // gets going on; fetch the next tile's rows (contiguous after these) while this one runs.
    if constexpr (NX == 1) {
      if ((c * kElem) % 64 == 0)
        for (int j = 0; j < NW; ++j) _mm_prefetch(reinterpret_cast<const char*>(w + (NW + j) * w_stride + c * kElem), _MM_HINT_T0);
    }
    __m256 wv[NW];
    for (int j = 0; j < NW; ++j) wv[j] = load8<T>(w + j * w_stride, c);
    for (int i = 0; i < NX; ++i) {
      __m256 xv = _mm256_loadu_ps(x + i * k + c);
      for (int j = 0; j < NW; ++j) acc[i][j] = _mm256_fmadd_ps(xv, wv[j], acc[i][j]);
    }
  }
  for (int i = 0; i < NX; ++i)
    for (int j = 0; j < NW; ++j) {
      float s = hsum8(acc[i][j]);
      for (int64_t c = k8; c < k; ++c) s = std::fma(x[i * k + c], load1<T>(w + j * w_stride, c), s);
      y[i * ldy + j] = s;
    }
}

// Rows [r0, r1) of W against all n rows of x (backend/cpu/matmul_row_blocking.h).
template <WeightFormat T>
QWENRT_AVX2 void rows_avx2(const float* x, int64_t n, int64_t k, const Weight& w, float* y, int64_t ldy, int64_t r0, int64_t r1) {
  const std::size_t stride = w.row_bytes();
  for_each_row_tile(n, k, r0, r1,
                    [&]<int NX, int NW>(int64_t i, int64_t r) { tile<T, NX, NW>(x + i * k, k, w.data + r * stride, stride, y + i * ldy + r, ldy); });
}

}  // namespace

bool have_avx2() {
  static const bool ok = [] {
    unsigned a, b, c, d;
    // F16C is CPUID leaf 1, ECX bit 29 (not every compiler's __builtin_cpu_supports knows it).
    const bool f16c = __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29));
    return f16c && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  }();
  return ok;
}

bool have_avx512() {
  // libgcc's CPU model checks that the OS saves the ZMM state before it reports AVX-512.
  static const bool ok = have_avx2() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
  return ok;
}

void dense_rows(const float* x, int64_t n, int64_t k, const Weight& w, float* y, int64_t ldy, int64_t r0, int64_t r1) {
  if (!have_avx2()) return rows_scalar(x, n, k, w, y, ldy, r0, r1);
  switch (w.format) {
    case WeightFormat::BF16: return rows_avx2<WeightFormat::BF16>(x, n, k, w, y, ldy, r0, r1);
    case WeightFormat::F16: return rows_avx2<WeightFormat::F16>(x, n, k, w, y, ldy, r0, r1);
    default: return rows_avx2<WeightFormat::F32>(x, n, k, w, y, ldy, r0, r1);
  }
}

}  // namespace qwenrt::cpu
