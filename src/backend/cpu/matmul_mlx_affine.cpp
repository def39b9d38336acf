// Products over MLX affine quantized weights (bits 2, 3, 4, 5, 6, 8; groups of 32, 64, 128): each
// weight element is dequantized in registers, w = fma(scale, q, bias) in f32 (exactly what
// Weight::row_to_f32 gives), and multiplied into 8 interleaved partial sums per (x row, weight
// row), reduced in the fixed order of the dense kernels. The AVX2 kernel and its scalar twin
// compute the same fmas in the same order, so they agree bit for bit, and every (x row, weight
// row) sum is independent of the batch and of the row range a thread takes.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "backend/cpu/matmul_formats.h"
#include "backend/cpu/matmul_row_blocking.h"
#include "backend/cpu/mlx_affine_unpack.h"
#include "core/error.h"
#include "core/half.h"

namespace qwenrt::cpu {

namespace {

using mlx_affine::extract;
using mlx_affine::load_scale;
using mlx_affine::unpack8;

// Same order as the AVX2 hsum8: (l0+l4)+(l2+l6) + (l1+l5)+(l3+l7).
inline float hsum_lanes(const float* l) { return ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7])); }

}  // namespace

void mlx_affine_rows_scalar(const float* x, int64_t n, int64_t k, const Weight& w, float* y, int64_t ldy, int64_t r0, int64_t r1) {
  const int bits = w.quant.bits, gs = w.quant.group_size;
  const std::size_t stride = w.row_bytes();
  const std::size_t sstride = w.group_row_bytes() / weight_element_bytes(w.quant.scale_format);
  std::vector<float> wrow(static_cast<std::size_t>(k));
  for (int64_t r = r0; r < r1; ++r) {
    const auto* row = reinterpret_cast<const uint8_t*>(w.data + static_cast<std::size_t>(r) * stride);
    for (int64_t c = 0; c < k; ++c) {
      const int64_t g = static_cast<int64_t>(static_cast<std::size_t>(r) * sstride) + c / gs;
      const float s = load_scale(w.quant.scale_format, w.quant.scales, g), b = load_scale(w.quant.scale_format, w.quant.biases, g);
      wrow[static_cast<std::size_t>(c)] = std::fma(s, static_cast<float>(extract(row, c, bits)), b);
    }
    for (int64_t i = 0; i < n; ++i) {
      const float* xr = x + i * k;
      float lanes[8] = {};
      for (int64_t c = 0; c < k; c += 8)
        for (int l = 0; l < 8; ++l) lanes[l] = std::fma(xr[c + l], wrow[static_cast<std::size_t>(c + l)], lanes[l]);
      y[i * ldy + r] = hsum_lanes(lanes);
    }
  }
}

namespace {

// ---- AVX2 + FMA kernel ----------------------------------------------------------------------
#define QWENRT_AVX2 __attribute__((target("avx2,fma,f16c")))

QWENRT_AVX2 inline float hsum8(__m256 v) {
  __m128 a = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  __m128 b = _mm_add_ps(a, _mm_movehl_ps(a, a));
  __m128 c = _mm_add_ss(b, _mm_shuffle_ps(b, b, 1));
  return _mm_cvtss_f32(c);
}

// A register tile: NX rows of x against NW weight rows, full depth k.
template <int B, WeightFormat S, int NX, int NW>
QWENRT_AVX2 void tile(const float* x, int64_t k, const Weight& w, int64_t r, float* y, int64_t ldy) {
  const std::size_t stride = w.row_bytes();
  const int64_t groups = k / w.quant.group_size;
  const int gs = w.quant.group_size;
  const uint8_t* rows[NW];
  for (int j = 0; j < NW; ++j) rows[j] = reinterpret_cast<const uint8_t*>(w.data + static_cast<std::size_t>(r + j) * stride);
  __m256 acc[NX][NW];
  for (int i = 0; i < NX; ++i)
    for (int j = 0; j < NW; ++j) acc[i][j] = _mm256_setzero_ps();
  for (int64_t g = 0; g < groups; ++g) {
    __m256 sv[NW], bv[NW];
    for (int j = 0; j < NW; ++j) {
      const int64_t gi = (r + j) * groups + g;
      sv[j] = _mm256_set1_ps(load_scale(S, w.quant.scales, gi));
      bv[j] = _mm256_set1_ps(load_scale(S, w.quant.biases, gi));
    }
    const int64_t c_end = (g + 1) * gs;
    for (int64_t c = g * gs; c < c_end; c += 8) {
      // Decode: as the dense tile, fetch the next tile's rows (contiguous after these) while this
      // one runs; the hardware prefetcher barely gets going on rows this short (0.8B 4-bit decode
      // on 2 EPYC vCPUs: 56 -> 36 ms a step; 8-bit 57 -> 46).
      if constexpr (NX == 1) {
        if ((c * B) % 512 == 0)
          for (int j = 0; j < NW; ++j) _mm_prefetch(reinterpret_cast<const char*>(rows[j] + NW * stride + c * B / 8), _MM_HINT_T0);
      }
      __m256 wv[NW];
      for (int j = 0; j < NW; ++j) wv[j] = _mm256_fmadd_ps(sv[j], _mm256_cvtepi32_ps(unpack8<B>(rows[j], c)), bv[j]);
      for (int i = 0; i < NX; ++i) {
        const __m256 xv = _mm256_loadu_ps(x + i * k + c);
        for (int j = 0; j < NW; ++j) acc[i][j] = _mm256_fmadd_ps(xv, wv[j], acc[i][j]);
      }
    }
  }
  for (int i = 0; i < NX; ++i)
    for (int j = 0; j < NW; ++j) y[i * ldy + j] = hsum8(acc[i][j]);
}

// Rows [r0, r1) of W against all n rows of x (backend/cpu/matmul_row_blocking.h).
template <int B, WeightFormat S>
QWENRT_AVX2 void rows_avx2(const float* x, int64_t n, int64_t k, const Weight& w, float* y, int64_t ldy, int64_t r0, int64_t r1) {
  for_each_row_tile(n, k, r0, r1, [&]<int NX, int NW>(int64_t i, int64_t r) { tile<B, S, NX, NW>(x + i * k, k, w, r, y + i * ldy + r, ldy); });
}

// ---- AVX-512VL lookup for 4-bit decode rows --------------------------------------------------
#define QWENRT_AVX512VL __attribute__((target("avx2,fma,f16c,avx512f,avx512vl")))

// The one-x-row tile of 4-bit weights: a group's 16 possible values fma(scale, q, bias), q = 0..15,
// made once per row and group (two vectors), then every 8 fields looked up from them by one
// two-table permute on their nibbles (it reads only an index's low 4 bits, so no mask). The same
// values as the AVX2 tile's conversion and fma, two instructions fewer per 8 fields, with the
// same fmas into the same sums (0.8B 4-bit decode, 2 EPYC vCPUs: see docs/quantization.md).
template <WeightFormat S, int NW>
QWENRT_AVX512VL void tile_q4_lookup(const float* x, int64_t k, const Weight& w, int64_t r, float* y) {
  const std::size_t stride = w.row_bytes();
  const int64_t groups = k / w.quant.group_size;
  const int gs = w.quant.group_size;
  const uint8_t* rows[NW];
  for (int j = 0; j < NW; ++j) rows[j] = reinterpret_cast<const uint8_t*>(w.data + static_cast<std::size_t>(r + j) * stride);
  const __m256 q_lo = _mm256_setr_ps(0, 1, 2, 3, 4, 5, 6, 7), q_hi = _mm256_setr_ps(8, 9, 10, 11, 12, 13, 14, 15);
  const __m256i shifts = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28);
  __m256 acc[NW];
  for (int j = 0; j < NW; ++j) acc[j] = _mm256_setzero_ps();
  for (int64_t g = 0; g < groups; ++g) {
    __m256 t_lo[NW], t_hi[NW];
    for (int j = 0; j < NW; ++j) {
      const int64_t gi = (r + j) * groups + g;
      const __m256 sv = _mm256_set1_ps(load_scale(S, w.quant.scales, gi)), bv = _mm256_set1_ps(load_scale(S, w.quant.biases, gi));
      t_lo[j] = _mm256_fmadd_ps(sv, q_lo, bv);
      t_hi[j] = _mm256_fmadd_ps(sv, q_hi, bv);
    }
    // The next tile's rows, as the AVX2 tile: a 64-byte line per 128 fields, asked for once per
    // group (groups of 32, 64 or 128 never straddle a multiple of 128), not checked every 8 fields.
    const int64_t c0 = g * gs;
    if (c0 % 128 == 0)
      for (int j = 0; j < NW; ++j) _mm_prefetch(reinterpret_cast<const char*>(rows[j] + NW * stride + c0 / 2), _MM_HINT_T0);
    const uint8_t* q[NW];
    for (int j = 0; j < NW; ++j) q[j] = rows[j] + c0 / 2;
    const float* xg = x + c0;
    for (int c = 0, b = 0; c < gs; c += 8, b += 4) {
      const __m256 xv = _mm256_loadu_ps(xg + c);
      for (int j = 0; j < NW; ++j) {
        uint32_t word;
        std::memcpy(&word, q[j] + b, 4);
        const __m256i idx = _mm256_srlv_epi32(_mm256_set1_epi32(static_cast<int>(word)), shifts);
        acc[j] = _mm256_fmadd_ps(xv, _mm256_permutex2var_ps(t_lo[j], idx, t_hi[j]), acc[j]);
      }
    }
  }
  for (int j = 0; j < NW; ++j) y[j] = hsum8(acc[j]);
}

// 4-bit rows: one-x-row tiles by lookup where the CPU has AVX-512VL, the rest as rows_avx2.
template <WeightFormat S>
QWENRT_AVX2 void rows_q4(const float* x, int64_t n, int64_t k, const Weight& w, float* y, int64_t ldy, int64_t r0, int64_t r1) {
  if (!have_avx512vl()) return rows_avx2<4, S>(x, n, k, w, y, ldy, r0, r1);
  for_each_row_tile(n, k, r0, r1, [&]<int NX, int NW>(int64_t i, int64_t r) {
    if constexpr (NX == 1) tile_q4_lookup<S, NW>(x + i * k, k, w, r, y + i * ldy + r);
    else tile<4, S, NX, NW>(x + i * k, k, w, r, y + i * ldy + r, ldy);
  });
}

template <int B>
void rows_avx2_bits(const float* x, int64_t n, int64_t k, const Weight& w, float* y, int64_t ldy, int64_t r0, int64_t r1) {
  if constexpr (B == 4) {
    switch (w.quant.scale_format) {
      case WeightFormat::F32: return rows_q4<WeightFormat::F32>(x, n, k, w, y, ldy, r0, r1);
      case WeightFormat::F16: return rows_q4<WeightFormat::F16>(x, n, k, w, y, ldy, r0, r1);
      default: return rows_q4<WeightFormat::BF16>(x, n, k, w, y, ldy, r0, r1);
    }
  }
  switch (w.quant.scale_format) {
    case WeightFormat::F32: return rows_avx2<B, WeightFormat::F32>(x, n, k, w, y, ldy, r0, r1);
    case WeightFormat::F16: return rows_avx2<B, WeightFormat::F16>(x, n, k, w, y, ldy, r0, r1);
    default: return rows_avx2<B, WeightFormat::BF16>(x, n, k, w, y, ldy, r0, r1);
  }
}

}  // namespace

void mlx_affine_rows(const float* x, int64_t n, int64_t k, const Weight& w, float* y, int64_t ldy, int64_t r0, int64_t r1) {
  if (k % w.quant.group_size != 0) fail("internal: MLX affine matrix with ", k, " columns, not a multiple of its group size ", w.quant.group_size);
  if (!have_avx2()) return mlx_affine_rows_scalar(x, n, k, w, y, ldy, r0, r1);
  switch (w.quant.bits) {
    case 2: return rows_avx2_bits<2>(x, n, k, w, y, ldy, r0, r1);
    case 3: return rows_avx2_bits<3>(x, n, k, w, y, ldy, r0, r1);
    case 4: return rows_avx2_bits<4>(x, n, k, w, y, ldy, r0, r1);
    case 5: return rows_avx2_bits<5>(x, n, k, w, y, ldy, r0, r1);
    case 6: return rows_avx2_bits<6>(x, n, k, w, y, ldy, r0, r1);
    case 8: return rows_avx2_bits<8>(x, n, k, w, y, ldy, r0, r1);
    default: fail("internal: MLX affine matrix with ", w.quant.bits, " bits");
  }
}

}  // namespace qwenrt::cpu
