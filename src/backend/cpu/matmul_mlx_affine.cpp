// Products over MLX affine quantized weights (bits 2, 3, 4, 5, 6, 8; groups of 32, 64, 128): each
// weight element is dequantized in registers, w = fma(scale, q, bias) in f32 (exactly what
// Weight::row_to_f32 gives), and multiplied into 8 interleaved partial sums per (x row, weight
// row) over the positions of mlx_affine_positions.h, reduced in the fixed order of the dense
// kernels. The AVX2 kernels and the scalar twin compute the same fmas in the same order, so they
// agree bit for bit, and every (x row, weight row) sum is independent of the batch and of the row
// range a thread takes.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "backend/cpu/lane_sum.h"
#include "backend/cpu/matmul_formats.h"
#include "backend/cpu/matmul_row_blocking.h"
#include "backend/cpu/mlx_affine_positions.h"
#include "backend/cpu/mlx_affine_unpack.h"
#include "backend/cpu/scale_format_dispatch.h"
#include "core/error.h"
#include "core/half.h"

namespace qwenrt::cpu {

namespace {

using mlx_affine::Activations;
using mlx_affine::extract;
using mlx_affine::load_scale;
using mlx_affine::Positions;
using mlx_affine::unpack8;

}  // namespace

void mlx_affine_rows_scalar(const Activations& a, const Weight& w, float* y, int64_t ldy, int64_t r0, int64_t r1) {
  const Positions& P = a.positions();
  const int bits = w.quant.bits, gs = w.quant.group_size;
  const std::size_t stride = w.row_bytes();
  const std::size_t sstride = w.group_row_bytes() / weight_element_bytes(w.quant.scale_format);
  std::vector<float> wrow(static_cast<std::size_t>(P.padded));
  for (int64_t r = r0; r < r1; ++r) {
    const auto* row = reinterpret_cast<const uint8_t*>(w.data + static_cast<std::size_t>(r) * stride);
    for (int64_t p = 0; p < P.padded; ++p) {
      const int64_t c = mlx_affine::column_at(P, p);
      if (c >= P.cols) {
        wrow[static_cast<std::size_t>(p)] = 0.0f;
        continue;
      }
      const int64_t g = static_cast<int64_t>(static_cast<std::size_t>(r) * sstride) + c / gs;
      const float s = load_scale(w.quant.scale_format, w.quant.scales, g), b = load_scale(w.quant.scale_format, w.quant.biases, g);
      wrow[static_cast<std::size_t>(p)] = std::fma(s, static_cast<float>(extract(row, c, bits)), b);
    }
    for (int64_t i = 0; i < a.rows(); ++i) {
      const float* xr = a.row(i);
      float lanes[8] = {};
      for (int64_t p = 0; p < P.padded; p += 8)
        for (int l = 0; l < 8; ++l) lanes[l] = std::fma(xr[p + l], wrow[static_cast<std::size_t>(p + l)], lanes[l]);
      y[i * ldy + r] = reduce_lanes(lanes);
    }
  }
}

namespace {

// ---- AVX2 + FMA kernel ----------------------------------------------------------------------
#define QWENRT_AVX2 __attribute__((target("avx2,fma,f16c")))

// The tile loops both kernels share; every loop over a tile's registers is unrolled explicitly
// (GCC at -O2 otherwise keeps the sums and the scales in memory).
template <int NX, int NW>
QWENRT_AVX2 inline void zero(__m256 (&acc)[NX][NW]) {
#pragma GCC unroll 8
  for (int i = 0; i < NX; ++i)
#pragma GCC unroll 8
    for (int j = 0; j < NW; ++j) acc[i][j] = _mm256_setzero_ps();
}

// acc[i][j] += x_i · w_j over one step of 8 positions (x_i = x + i · ldx).
template <int NX, int NW>
QWENRT_AVX2 inline void accumulate(__m256 (&acc)[NX][NW], const float* x, int64_t ldx, const __m256 (&wv)[NW]) {
#pragma GCC unroll 8
  for (int i = 0; i < NX; ++i) {
    const __m256 xv = _mm256_loadu_ps(x + i * ldx);
#pragma GCC unroll 8
    for (int j = 0; j < NW; ++j) acc[i][j] = _mm256_fmadd_ps(xv, wv[j], acc[i][j]);
  }
}

template <int NX, int NW>
QWENRT_AVX2 inline void store_sums(const __m256 (&acc)[NX][NW], float* y, int64_t ldy) {
#pragma GCC unroll 8
  for (int i = 0; i < NX; ++i)
#pragma GCC unroll 8
    for (int j = 0; j < NW; ++j) y[i * ldy + j] = hsum8(acc[i][j]);
}

// A register tile: NX rows of x against NW weight rows, full depth k (widths other than 4, whose
// positions are the columns).
template <int B, WeightFormat S, int NX, int NW>
QWENRT_AVX2 void tile(const float* x, int64_t k, const Weight& w, int64_t r, float* y, int64_t ldy) {
  const std::size_t stride = w.row_bytes();
  const int64_t groups = k / w.quant.group_size;
  const int gs = w.quant.group_size;
  const uint8_t* rows[NW];
#pragma GCC unroll 8
  for (int j = 0; j < NW; ++j) rows[j] = reinterpret_cast<const uint8_t*>(w.data + static_cast<std::size_t>(r + j) * stride);
  __m256 acc[NX][NW];
  zero(acc);
  for (int64_t g = 0; g < groups; ++g) {
    __m256 sv[NW], bv[NW];
#pragma GCC unroll 8
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
#pragma GCC unroll 8
          for (int j = 0; j < NW; ++j) _mm_prefetch(reinterpret_cast<const char*>(rows[j] + NW * stride + c * B / 8), _MM_HINT_T0);
      }
      __m256 wv[NW];
#pragma GCC unroll 8
      for (int j = 0; j < NW; ++j) wv[j] = _mm256_fmadd_ps(sv[j], _mm256_cvtepi32_ps(unpack8<B>(rows[j], c)), bv[j]);
      accumulate(acc, x + c, k, wv);
    }
  }
  store_sums(acc, y, ldy);
}

// A register tile of 4-bit weights over x rows in position order (row stride kp): per 64 columns
// of a weight row one 32-byte load and its two nibble planes (and, shift, and), then per 8 fields
// one shuffle, one conversion, the dequantizing fma and one fma per x row. Lanes 0-3 and 4-7 of a
// block are two groups where groups are 32 columns (the second zero past the last column).
template <WeightFormat S, int NX, int NW>
QWENRT_AVX2 void tile_q4(const float* x, int64_t kp, const Weight& w, int64_t r, float* y, int64_t ldy) {
  const std::size_t stride = w.row_bytes();
  const int64_t cols = w.cols, groups = cols / w.quant.group_size;
  const bool split = w.quant.group_size == 32;
  const int shift = w.quant.group_size == 32 ? 5 : w.quant.group_size == 64 ? 6 : 7;
  const uint8_t* rows[NW];
#pragma GCC unroll 8
  for (int j = 0; j < NW; ++j) rows[j] = reinterpret_cast<const uint8_t*>(w.data + static_cast<std::size_t>(r + j) * stride);
  __m256 acc[NX][NW];
  zero(acc);
  for (int64_t p = 0; p < kp; p += 64) {
    // Decode: fetch the next tile's rows (contiguous after these) while this one runs, a 64-byte
    // line per 128 fields; the hardware prefetcher barely gets going on rows this short.
    if constexpr (NX == 1) {
      if (p % 128 == 0)
#pragma GCC unroll 8
        for (int j = 0; j < NW; ++j) _mm_prefetch(reinterpret_cast<const char*>(rows[j] + NW * stride + p / 2), _MM_HINT_T0);
    }
    const bool half = cols - p < 64;
    const int64_t g = p >> shift;
    __m256 sv[NW], bv[NW];
    mlx_affine::NibblePlanes planes[NW];
#pragma GCC unroll 8
    for (int j = 0; j < NW; ++j) {
      const int64_t gi = (r + j) * groups + g;
      sv[j] = _mm256_set1_ps(load_scale(S, w.quant.scales, gi));
      bv[j] = _mm256_set1_ps(load_scale(S, w.quant.biases, gi));
      if (split) {
        const __m256 s1 = half ? _mm256_setzero_ps() : _mm256_set1_ps(load_scale(S, w.quant.scales, gi + 1));
        const __m256 b1 = half ? _mm256_setzero_ps() : _mm256_set1_ps(load_scale(S, w.quant.biases, gi + 1));
        sv[j] = _mm256_blend_ps(sv[j], s1, 0xF0);
        bv[j] = _mm256_blend_ps(bv[j], b1, 0xF0);
      }
      planes[j] = mlx_affine::nibble_planes(rows[j] + p / 2, half);
    }
#pragma GCC unroll 8
    for (int t = 0; t < 8; ++t) {
      __m256 wv[NW];
#pragma GCC unroll 8
      for (int j = 0; j < NW; ++j) wv[j] = _mm256_fmadd_ps(sv[j], _mm256_cvtepi32_ps(mlx_affine::nibble_lanes(planes[j], t)), bv[j]);
      accumulate(acc, x + p + 8 * t, kp, wv);
    }
  }
  store_sums(acc, y, ldy);
}

// tile_q4 with AVX-512 (BW for the 64-byte shuffle): weight rows 2q and 2q + 1 side by side in
// one 16-lane register (lanes 0-7 and 8-15), the x row's 8 positions broadcast to both halves.
// Every lane does what it does in tile_q4 (the same shuffle, conversion, dequantizing fma and
// product fma, in the same order), so the bits are tile_q4's; half the instructions per weight.
// GCC 12's AVX-512 headers leave unused lanes of some inserts undefined and then warn about it
// (GCC bug 105593, fixed in 13).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#define QWENRT_AVX512 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,f16c")))
template <WeightFormat S, int NX, int NP>
QWENRT_AVX512 void tile_q4_512(const float* x, int64_t kp, const Weight& w, int64_t r, float* y, int64_t ldy) {
  constexpr int NW = 2 * NP;
  const std::size_t stride = w.row_bytes();
  const int64_t cols = w.cols, groups = cols / w.quant.group_size;
  const bool split = w.quant.group_size == 32;
  const int shift = w.quant.group_size == 32 ? 5 : w.quant.group_size == 64 ? 6 : 7;
  const uint8_t* rows[NW];
#pragma GCC unroll 8
  for (int j = 0; j < NW; ++j) rows[j] = reinterpret_cast<const uint8_t*>(w.data + static_cast<std::size_t>(r + j) * stride);
  __m512i spread[4];
#pragma GCC unroll 4
  for (int t = 0; t < 4; ++t)
    spread[t] = _mm512_maskz_broadcast_i32x8(0xFFFF, _mm256_load_si256(reinterpret_cast<const __m256i*>(mlx_affine::kNibbleSpread.m[t])));
  __m512 acc[NX][NP];
#pragma GCC unroll 8
  for (int i = 0; i < NX; ++i)
#pragma GCC unroll 4
    for (int q = 0; q < NP; ++q) acc[i][q] = _mm512_setzero_ps();
  for (int64_t p = 0; p < kp; p += 64) {
    if constexpr (NX == 1) {
      if (p % 128 == 0)
#pragma GCC unroll 8
        for (int j = 0; j < NW; ++j) _mm_prefetch(reinterpret_cast<const char*>(rows[j] + NW * stride + p / 2), _MM_HINT_T0);
    }
    const bool half = cols - p < 64;
    const int64_t g = p >> shift;
    __m512 sv[NP], bv[NP];
    __m512i plane[NP][2];
#pragma GCC unroll 4
    for (int q = 0; q < NP; ++q) {
      __m256 s2[2], b2[2];
      mlx_affine::NibblePlanes n2[2];
#pragma GCC unroll 2
      for (int h = 0; h < 2; ++h) {
        const int64_t gi = (r + 2 * q + h) * groups + g;
        s2[h] = _mm256_set1_ps(load_scale(S, w.quant.scales, gi));
        b2[h] = _mm256_set1_ps(load_scale(S, w.quant.biases, gi));
        if (split) {
          const __m256 s1 = half ? _mm256_setzero_ps() : _mm256_set1_ps(load_scale(S, w.quant.scales, gi + 1));
          const __m256 b1 = half ? _mm256_setzero_ps() : _mm256_set1_ps(load_scale(S, w.quant.biases, gi + 1));
          s2[h] = _mm256_blend_ps(s2[h], s1, 0xF0);
          b2[h] = _mm256_blend_ps(b2[h], b1, 0xF0);
        }
        n2[h] = mlx_affine::nibble_planes(rows[2 * q + h] + p / 2, half);
      }
      sv[q] = _mm512_insertf32x8(_mm512_zextps256_ps512(s2[0]), s2[1], 1);
      bv[q] = _mm512_insertf32x8(_mm512_zextps256_ps512(b2[0]), b2[1], 1);
#pragma GCC unroll 2
      for (int e = 0; e < 2; ++e) plane[q][e] = _mm512_inserti32x8(_mm512_zextsi256_si512(n2[0].plane[e]), n2[1].plane[e], 1);
    }
#pragma GCC unroll 8
    for (int t = 0; t < 8; ++t) {
      __m512 wv[NP];
#pragma GCC unroll 4
      for (int q = 0; q < NP; ++q) wv[q] = _mm512_fmadd_ps(sv[q], _mm512_cvtepi32_ps(_mm512_shuffle_epi8(plane[q][t / 4], spread[t % 4])), bv[q]);
#pragma GCC unroll 8
      for (int i = 0; i < NX; ++i) {
        const __m512 xv = _mm512_maskz_broadcast_f32x8(0xFFFF, _mm256_loadu_ps(x + i * kp + p + 8 * t));
#pragma GCC unroll 4
        for (int q = 0; q < NP; ++q) acc[i][q] = _mm512_fmadd_ps(xv, wv[q], acc[i][q]);
      }
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < NX; ++i)
#pragma GCC unroll 4
    for (int q = 0; q < NP; ++q) {
      y[i * ldy + 2 * q] = hsum8(_mm512_castps512_ps256(acc[i][q]));
      y[i * ldy + 2 * q + 1] = hsum8(_mm512_maskz_extractf32x8_ps(0xFF, acc[i][q], 1));
    }
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

bool have_avx512_bw() {
  static const bool ok = have_avx512() && __builtin_cpu_supports("avx512bw");
  return ok;
}

// 4-bit rows with AVX-512 (a lone x row against 8 weight rows: with 4, two 16-lane sums in flight,
// the fma chains' latency bounded it); an odd row left in a block takes tile_q4 (same bits).
template <WeightFormat S>
void rows_q4_avx512(const float* x, int64_t n, int64_t kp, const Weight& w, float* y, int64_t ldy, int64_t r0, int64_t r1) {
  for_each_paired_tile<1>(
      n, kp, r0, r1, [&]<int NX, int NP>(int64_t i, int64_t r) { tile_q4_512<S, NX, NP>(x + i * kp, kp, w, r, y + i * ldy + r, ldy); },
      [&](int64_t i, int64_t r) { tile_q4<S, 1, 1>(x + i * kp, kp, w, r, y + i * ldy + r, ldy); });
}

// Rows [r0, r1) of W against all rows of x (backend/cpu/matmul_row_blocking.h).
template <int B, WeightFormat S>
QWENRT_AVX2 void rows_avx2(const Activations& a, const Weight& w, float* y, int64_t ldy, int64_t r0, int64_t r1) {
  const int64_t kp = a.positions().padded;
  const float* x = a.data();
  if constexpr (B == 4) {
    if (have_avx512_bw()) return rows_q4_avx512<S>(x, a.rows(), kp, w, y, ldy, r0, r1);
  }
  for_each_row_tile(a.rows(), kp, r0, r1, [&]<int NX, int NW>(int64_t i, int64_t r) {
    if constexpr (B == 4) tile_q4<S, NX, NW>(x + i * kp, kp, w, r, y + i * ldy + r, ldy);
    else tile<B, S, NX, NW>(x + i * kp, kp, w, r, y + i * ldy + r, ldy);
  });
}

template <int B>
void rows_avx2_bits(const Activations& a, const Weight& w, float* y, int64_t ldy, int64_t r0, int64_t r1) {
  return with_scale_format(w.quant.scale_format, [&]<WeightFormat S>() { return rows_avx2<B, S>(a, w, y, ldy, r0, r1); });
}

}  // namespace

void mlx_affine_rows(const Activations& a, const Weight& w, float* y, int64_t ldy, int64_t r0, int64_t r1) {
  if (!(a.positions() == mlx_affine::positions(w))) fail("internal: MLX affine activations prepared for another matrix");
  if (!have_avx2()) return mlx_affine_rows_scalar(a, w, y, ldy, r0, r1);
  switch (w.quant.bits) {
    case 2: return rows_avx2_bits<2>(a, w, y, ldy, r0, r1);
    case 3: return rows_avx2_bits<3>(a, w, y, ldy, r0, r1);
    case 4: return rows_avx2_bits<4>(a, w, y, ldy, r0, r1);
    case 5: return rows_avx2_bits<5>(a, w, y, ldy, r0, r1);
    case 6: return rows_avx2_bits<6>(a, w, y, ldy, r0, r1);
    case 8: return rows_avx2_bits<8>(a, w, y, ldy, r0, r1);
    default: fail("internal: MLX affine matrix with ", w.quant.bits, " bits");
  }
}

void mlx_affine_rows(const float* x, int64_t n, int64_t k, const Weight& w, float* y, int64_t ldy, int64_t r0, int64_t r1) {
  if (k != w.cols) fail("internal: MLX affine product over ", k, " columns of a ", w.cols, "-column matrix");
  mlx_affine_rows(Activations(x, n, mlx_affine::positions(w)), w, y, ldy, r0, r1);
}

void mlx_affine_rows_scalar(const float* x, int64_t n, int64_t k, const Weight& w, float* y, int64_t ldy, int64_t r0, int64_t r1) {
  if (k != w.cols) fail("internal: MLX affine product over ", k, " columns of a ", w.cols, "-column matrix");
  mlx_affine_rows_scalar(Activations(x, n, mlx_affine::positions(w)), w, y, ldy, r0, r1);
}

}  // namespace qwenrt::cpu
