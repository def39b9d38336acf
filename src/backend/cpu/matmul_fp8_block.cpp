// Products over block-scaled FP8 weights (float8 e4m3fn, one scale per [block_rows, block_cols]
// tile): each weight byte is decoded in registers and scaled, w = e4m3(q) · scale in f32 (exactly
// what Weight::row_to_f32 gives), then multiplied into 8 interleaved partial sums per (x row,
// weight row) in the order of the dense kernels: a product equals the dense product over the
// dequantized matrix bit for bit. The AVX2 kernel and its scalar twin agree bit for bit, and every
// sum is independent of the batch and of the row range a thread takes. The decoding is
// fp8_block_decode.h's.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "backend/cpu/fp8_block_decode.h"
#include "backend/cpu/lane_sum.h"
#include "backend/cpu/matmul_formats.h"
#include "backend/cpu/matmul_row_blocking.h"
#include "backend/cpu/scale_format_dispatch.h"
#include "core/error.h"
#include "core/half.h"

namespace qwenrt::cpu {

namespace {

using fp8_block::check;
using fp8_block::decode8;
using fp8_block::scaled_256;

template <WeightFormat S>
void rows_scalar(const float* x, int64_t n, int64_t k, const Weight& w, float* y, int64_t ldy, int64_t r0, int64_t r1) {
  const int64_t k8 = k / 8 * 8;
  std::vector<float> wrow(static_cast<std::size_t>(k));
  for (int64_t r = r0; r < r1; ++r) {
    for (int64_t c = 0; c < k; ++c) wrow[static_cast<std::size_t>(c)] = fp8_block::element<S>(w, r, c);
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
      for (int64_t c = k8; c < k; ++c) s = std::fma(x[i * k + c], fp8_block::element<S>(w, r + j, c), s);
      y[i * ldy + j] = s;
    }
}

// Rows [r0, r1) of W against all n rows of x (backend/cpu/matmul_row_blocking.h).
template <WeightFormat S>
QWENRT_AVX2 void rows_avx2(const float* x, int64_t n, int64_t k, const Weight& w, float* y, int64_t ldy, int64_t r0, int64_t r1) {
  for_each_row_tile(n, k, r0, r1, [&]<int NX, int NW>(int64_t i, int64_t r) { tile<S, NX, NW>(x + i * k, k, w, r, y + i * ldy + r, ldy); });
}

}  // namespace

void fp8_block_rows_scalar(const float* x, int64_t n, int64_t k, const Weight& w, float* y, int64_t ldy, int64_t r0, int64_t r1) {
  check(w, k);
  return with_scale_format(w.fp8.scale_format, [&]<WeightFormat S>() { return rows_scalar<S>(x, n, k, w, y, ldy, r0, r1); });
}

void fp8_block_rows(const float* x, int64_t n, int64_t k, const Weight& w, float* y, int64_t ldy, int64_t r0, int64_t r1) {
  if (!have_avx2()) return fp8_block_rows_scalar(x, n, k, w, y, ldy, r0, r1);
  check(w, k);
  return with_scale_format(w.fp8.scale_format, [&]<WeightFormat S>() { return rows_avx2<S>(x, n, k, w, y, ldy, r0, r1); });
}

}  // namespace qwenrt::cpu
