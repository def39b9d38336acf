#include "backend/cpu/vector_ops.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "backend/cpu/matmul_formats.h"

namespace qwenrt::cpu {

namespace {

inline float reduce_lanes(const float* l) { return ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7])); }

// Columns a register block of weighted_rows covers: 8 registers of 8 floats.
constexpr int64_t kBlock = 64;

__attribute__((target("avx2,fma"))) float reduce_avx2(__m256 acc, const float* a, const float* b, int64_t n8, int64_t n) {
  alignas(32) float l[8];
  _mm256_store_ps(l, acc);
  float s = reduce_lanes(l);
  for (int64_t i = n8; i < n; ++i) s = std::fma(a[i], b[i], s);
  return s;
}

__attribute__((target("avx2,fma"))) float dot_avx2(const float* a, const float* b, int64_t n) {
  const int64_t n8 = n / 8 * 8;
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < n8; i += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc);
  return reduce_avx2(acc, a, b, n8, n);
}

__attribute__((target("avx2,fma"))) void dot_rows_avx2(const float* a, const float* const* rows, int64_t offset, int64_t count, int64_t n, float* out) {
  const int64_t n8 = n / 8 * 8;
  int64_t r = 0;
  for (; r + 4 <= count; r += 4) {
    const float *b0 = rows[r] + offset, *b1 = rows[r + 1] + offset, *b2 = rows[r + 2] + offset, *b3 = rows[r + 3] + offset;
    __m256 c0 = _mm256_setzero_ps(), c1 = c0, c2 = c0, c3 = c0;
    for (int64_t i = 0; i < n8; i += 8) {
      const __m256 av = _mm256_loadu_ps(a + i);
      c0 = _mm256_fmadd_ps(av, _mm256_loadu_ps(b0 + i), c0);
      c1 = _mm256_fmadd_ps(av, _mm256_loadu_ps(b1 + i), c1);
      c2 = _mm256_fmadd_ps(av, _mm256_loadu_ps(b2 + i), c2);
      c3 = _mm256_fmadd_ps(av, _mm256_loadu_ps(b3 + i), c3);
    }
    out[r] = reduce_avx2(c0, a, b0, n8, n);
    out[r + 1] = reduce_avx2(c1, a, b1, n8, n);
    out[r + 2] = reduce_avx2(c2, a, b2, n8, n);
    out[r + 3] = reduce_avx2(c3, a, b3, n8, n);
  }
  for (; r < count; ++r) out[r] = dot_avx2(a, rows[r] + offset, n);
}

__attribute__((target("avx2,fma"))) void weighted_rows_avx2(const float* w, const float* const* rows, int64_t offset, int64_t count, int64_t n, float* out) {
  int64_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    __m256 acc[8];
    for (auto& v : acc) v = _mm256_setzero_ps();
    for (int64_t r = 0; r < count; ++r) {
      const __m256 wr = _mm256_set1_ps(w[r]);
      const float* x = rows[r] + offset + i;
#pragma GCC unroll 8
      for (int v = 0; v < 8; ++v) acc[v] = _mm256_fmadd_ps(wr, _mm256_loadu_ps(x + 8 * v), acc[v]);
    }
    for (int v = 0; v < 8; ++v) _mm256_storeu_ps(out + i + 8 * v, acc[v]);
  }
  for (; i + 8 <= n; i += 8) {
    __m256 acc = _mm256_setzero_ps();
    for (int64_t r = 0; r < count; ++r) acc = _mm256_fmadd_ps(_mm256_set1_ps(w[r]), _mm256_loadu_ps(rows[r] + offset + i), acc);
    _mm256_storeu_ps(out + i, acc);
  }
  for (; i < n; ++i) {
    float acc = 0;
    for (int64_t r = 0; r < count; ++r) acc = std::fma(w[r], rows[r][offset + i], acc);
    out[i] = acc;
  }
}

void axpy_scalar(float a, const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = std::fma(a, x[i], y[i]);
}

}  // namespace

float dot_scalar(const float* a, const float* b, int64_t n) {
  const int64_t n8 = n / 8 * 8;
  float l[8] = {};
  for (int64_t i = 0; i < n8; i += 8)
    for (int j = 0; j < 8; ++j) l[j] = std::fma(a[i + j], b[i + j], l[j]);
  float s = reduce_lanes(l);
  for (int64_t i = n8; i < n; ++i) s = std::fma(a[i], b[i], s);
  return s;
}

void dot_rows_scalar(const float* a, const float* const* rows, int64_t offset, int64_t count, int64_t n, float* out) {
  for (int64_t r = 0; r < count; ++r) out[r] = dot_scalar(a, rows[r] + offset, n);
}

void weighted_rows_scalar(const float* w, const float* const* rows, int64_t offset, int64_t count, int64_t n, float* out) {
  std::fill(out, out + n, 0.0f);
  for (int64_t r = 0; r < count; ++r) axpy_scalar(w[r], rows[r] + offset, out, n);
}

float dot(const float* a, const float* b, int64_t n) { return have_avx2() ? dot_avx2(a, b, n) : dot_scalar(a, b, n); }

void dot_rows(const float* a, const float* const* rows, int64_t offset, int64_t count, int64_t n, float* out) {
  have_avx2() ? dot_rows_avx2(a, rows, offset, count, n, out) : dot_rows_scalar(a, rows, offset, count, n, out);
}

void weighted_rows(const float* w, const float* const* rows, int64_t offset, int64_t count, int64_t n, float* out) {
  have_avx2() ? weighted_rows_avx2(w, rows, offset, count, n, out) : weighted_rows_scalar(w, rows, offset, count, n, out);
}

}  // namespace qwenrt::cpu
