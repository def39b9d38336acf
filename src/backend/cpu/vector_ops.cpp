#include "backend/cpu/vector_ops.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "backend/cpu/lane_sum.h"
#include "backend/cpu/matmul_formats.h"

namespace qwenrt::cpu {

namespace {

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

// Four dot products at once, so four chains of fmas are in flight: (a[p], b[p]) for p < 4, each
// exactly dot's sum. One side is the same vector for all four (a with kSharedA, else b), loaded
// once an iteration.
template <bool kSharedA>
__attribute__((target("avx2,fma"))) inline void dot4_avx2(const float* const (&a)[4], const float* const (&b)[4], int64_t n, float (&out)[4]) {
  const int64_t n8 = n / 8 * 8;
  __m256 c[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
  for (int64_t i = 0; i < n8; i += 8) {
    const __m256 shared = _mm256_loadu_ps((kSharedA ? a[0] : b[0]) + i);
#pragma GCC unroll 4
    for (int p = 0; p < 4; ++p) c[p] = _mm256_fmadd_ps(shared, _mm256_loadu_ps((kSharedA ? b[p] : a[p]) + i), c[p]);
  }
  for (int p = 0; p < 4; ++p) out[p] = reduce_avx2(c[p], a[p], b[p], n8, n);
}

__attribute__((target("avx2,fma"))) void dot_queries_avx2(const float* const* queries, int64_t M, const float* const* keys, int64_t offset,
                                                          int64_t count, int64_t n, float* out, int64_t ld) {
  int64_t m = 0;
  for (; m + 4 <= M; m += 4) {  // four queries against each key
    const float* const a[4] = {queries[m], queries[m + 1], queries[m + 2], queries[m + 3]};
    for (int64_t j = 0; j < count; ++j) {
      const float* const b[4] = {keys[j] + offset, keys[j] + offset, keys[j] + offset, keys[j] + offset};
      float s[4];
      dot4_avx2<false>(a, b, n, s);
      for (int p = 0; p < 4; ++p) out[(m + p) * ld + j] = s[p];
    }
  }
  for (; m < M; ++m) {  // the last queries alone, against four keys at a time
    const float* const a[4] = {queries[m], queries[m], queries[m], queries[m]};
    int64_t j = 0;
    for (; j + 4 <= count; j += 4) {
      const float* const b[4] = {keys[j] + offset, keys[j + 1] + offset, keys[j + 2] + offset, keys[j + 3] + offset};
      float s[4];
      dot4_avx2<true>(a, b, n, s);
      for (int p = 0; p < 4; ++p) out[m * ld + j + p] = s[p];
    }
    for (; j < count; ++j) out[m * ld + j] = dot_avx2(a[0], keys[j] + offset, n);
  }
}

// Q queries' sums over NV registers of columns [i, i + 8·NV).
template <int Q, int NV>
__attribute__((target("avx2,fma"))) inline void weighted_block_avx2(const float* w, int64_t ld, const int64_t* counts, const float* const* rows,
                                                                    int64_t offset, int64_t i, float* const* outs) {
  int64_t common = counts[0], longest = counts[0];
  for (int q = 1; q < Q; ++q) common = std::min(common, counts[q]), longest = std::max(longest, counts[q]);
  // (Every loop over the tile unrolled: GCC keeps acc[][] in memory otherwise.)
  __m256 acc[Q][NV];
#pragma GCC unroll 4
  for (int q = 0; q < Q; ++q)
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) acc[q][v] = _mm256_setzero_ps();
  for (int64_t j = 0; j < common; ++j) {
    const float* x = rows[j] + offset + i;
    __m256 xv[NV];
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) xv[v] = _mm256_loadu_ps(x + 8 * v);
#pragma GCC unroll 4
    for (int q = 0; q < Q; ++q) {
      const __m256 wq = _mm256_set1_ps(w[q * ld + j]);
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) acc[q][v] = _mm256_fmadd_ps(wq, xv[v], acc[q][v]);
    }
  }
  for (int64_t j = common; j < longest; ++j) {  // the rows only some queries reach (causal ends)
    const float* x = rows[j] + offset + i;
#pragma GCC unroll 4
    for (int q = 0; q < Q; ++q) {
      if (j >= counts[q]) continue;
      const __m256 wq = _mm256_set1_ps(w[q * ld + j]);
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) acc[q][v] = _mm256_fmadd_ps(wq, _mm256_loadu_ps(x + 8 * v), acc[q][v]);
    }
  }
#pragma GCC unroll 4
  for (int q = 0; q < Q; ++q)
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) _mm256_storeu_ps(outs[q] + i + 8 * v, acc[q][v]);
}

// Blocks of 8 / Q registers a query: 8 sums in flight whatever Q (an fma's latency is 4 cycles at
// 2 a cycle).
template <int Q>
__attribute__((target("avx2,fma"))) void weighted_queries_avx2(const float* w, int64_t ld, const int64_t* counts, const float* const* rows,
                                                               int64_t offset, int64_t n, float* const* outs) {
  constexpr int NV = 8 / Q;
  int64_t i = 0;
  for (; i + 8 * NV <= n; i += 8 * NV) weighted_block_avx2<Q, NV>(w, ld, counts, rows, offset, i, outs);
  for (; i + 8 <= n; i += 8) weighted_block_avx2<Q, 1>(w, ld, counts, rows, offset, i, outs);
  for (; i < n; ++i)
    for (int q = 0; q < Q; ++q) {
      float acc = 0;
      for (int64_t j = 0; j < counts[q]; ++j) acc = std::fma(w[q * ld + j], rows[j][offset + i], acc);
      outs[q][i] = acc;
    }
}

__attribute__((target("avx2,fma"))) void weighted_rows_avx2(const float* w, int64_t ld, const int64_t* counts, int64_t M, const float* const* rows,
                                                            int64_t offset, int64_t n, float* const* outs) {
  int64_t m = 0;
  for (; m + 4 <= M; m += 4) weighted_queries_avx2<4>(w + m * ld, ld, counts + m, rows, offset, n, outs + m);
  for (; m + 2 <= M; m += 2) weighted_queries_avx2<2>(w + m * ld, ld, counts + m, rows, offset, n, outs + m);
  for (; m < M; ++m) weighted_queries_avx2<1>(w + m * ld, ld, counts + m, rows, offset, n, outs + m);
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

void dot_queries_scalar(const float* const* queries, int64_t M, const float* const* keys, int64_t offset, int64_t count, int64_t n, float* out,
                        int64_t ld) {
  for (int64_t m = 0; m < M; ++m)
    for (int64_t j = 0; j < count; ++j) out[m * ld + j] = dot_scalar(queries[m], keys[j] + offset, n);
}

void weighted_rows_scalar(const float* w, int64_t ld, const int64_t* counts, int64_t M, const float* const* rows, int64_t offset, int64_t n,
                          float* const* outs) {
  for (int64_t m = 0; m < M; ++m) {
    float* o = outs[m];
    std::fill(o, o + n, 0.0f);
    for (int64_t j = 0; j < counts[m]; ++j)
      for (int64_t i = 0; i < n; ++i) o[i] = std::fma(w[m * ld + j], rows[j][offset + i], o[i]);
  }
}

float dot(const float* a, const float* b, int64_t n) { return have_avx2() ? dot_avx2(a, b, n) : dot_scalar(a, b, n); }

void dot_queries(const float* const* queries, int64_t M, const float* const* keys, int64_t offset, int64_t count, int64_t n, float* out, int64_t ld) {
  have_avx2() ? dot_queries_avx2(queries, M, keys, offset, count, n, out, ld) : dot_queries_scalar(queries, M, keys, offset, count, n, out, ld);
}

void weighted_rows(const float* w, int64_t ld, const int64_t* counts, int64_t M, const float* const* rows, int64_t offset, int64_t n,
                   float* const* outs) {
  have_avx2() ? weighted_rows_avx2(w, ld, counts, M, rows, offset, n, outs) : weighted_rows_scalar(w, ld, counts, M, rows, offset, n, outs);
}

}  // namespace qwenrt::cpu
