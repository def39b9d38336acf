// Products over 4- and 8-bit MLX affine weights with int8 activations (mlx_affine_int8.h has the
// definition). Per (x row, weight row) the sum runs in 8 float lanes, reduced in the fixed lane
// order at the end. Per chunk (64 columns at 4 bits, 32 at 8) lane l takes the exact integer sum
// Σ q · xi over its columns (I) and, with d, Σx (U) and 8·Σ(x − x̂) (C) of its columns and s, b of
// its group:
//   4 bits: lane = fma(b, U, fma(fma(I, d, C), s, lane))        = s·Σ(q − 8)·x̂ + (b + 8s)·Σx
//   8 bits: lane = fma(fma(128, s, b), U, fma(I · d, s, lane))   (I over q − 128)
// always as explicit fmas: the AVX2 kernel and the scalar twin are compiled for different targets,
// and a product left for the compiler to contract would differ between them.
#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "backend/cpu/lane_sum.h"
#include "backend/cpu/matmul_formats.h"
#include "backend/cpu/matmul_row_blocking.h"
#include "backend/cpu/mlx_affine_int8.h"
#include "backend/cpu/mlx_affine_unpack.h"
#include "backend/cpu/scale_format_dispatch.h"
#include "core/error.h"

namespace qwenrt::cpu {

namespace {

std::atomic<bool> g_int8_activations{false};

}  // namespace

void set_int8_activations(bool on) { g_int8_activations.store(on, std::memory_order_relaxed); }
bool int8_activations() { return g_int8_activations.load(std::memory_order_relaxed); }

bool int8_product_applies(const Weight& w) { return w.format == WeightFormat::MlxAffine && (w.quant.bits == 4 || w.quant.bits == 8); }

namespace mlx_affine {

Int8Activations::Layout Int8Activations::layout_of(const Weight& w) {
  if (!int8_product_applies(w)) fail("internal: int8 activations for a matrix in ", weight_format_name(w.format), " with ", w.quant.bits, " bits");
  const int gs = w.quant.group_size;
  if (gs < 32 || gs % 32 != 0 || w.cols % gs != 0) fail("internal: MLX affine matrix with ", w.cols, " columns in groups of ", gs);
  Layout L{w.quant.bits, w.cols, w.cols};
  if (L.bits == 4) L.padded = (w.cols + 63) / 64 * 64;
  return L;
}

Int8Activations::Int8Activations(const float* x, int64_t n, const Layout& L) : layout_(L), n_(n) {
  const int64_t lanes = L.lanes(), lane_cols = L.lane_cols();
  q_.assign(static_cast<std::size_t>(n * L.padded), 0);
  d_.assign(static_cast<std::size_t>(n * lanes), 0.0f);
  sum_.assign(d_.size(), 0.0f);
  correction_.assign(d_.size(), 0.0f);
  std::vector<int8_t> xi(static_cast<std::size_t>(L.padded), 0);
  std::vector<float> d(static_cast<std::size_t>(L.padded / 32), 0.0f);
  for (int64_t i = 0; i < n; ++i) {
    const float* xr = x + i * L.cols;
    for (int64_t blk = 0; blk * 32 < L.cols; ++blk) {
      float amax = 0.0f;
      bool finite = true;
      for (int64_t c = 32 * blk; c < 32 * blk + 32; ++c) {
        amax = std::max(amax, std::fabs(xr[c]));
        finite &= std::isfinite(xr[c]);
      }
      // A non-finite activation makes its block's scale NaN (values 0, never a NaN converted to
      // an integer): the product is NaN, as the exact one would be, and the model's finiteness
      // check names the layer.
      if (!finite) {
        d[static_cast<std::size_t>(blk)] = std::numeric_limits<float>::quiet_NaN();
        std::fill_n(xi.begin() + 32 * blk, 32, int8_t{0});
        continue;
      }
      // A block too small for 127 / amax to be finite (below ~4e-37: zero in effect) rounds to
      // zeros, like an all-zero one.
      const float inv = 127.0f / amax;
      if (!(amax > 0.0f) || !std::isfinite(inv)) {
        d[static_cast<std::size_t>(blk)] = 0.0f;
        std::fill_n(xi.begin() + 32 * blk, 32, int8_t{0});
        continue;
      }
      d[static_cast<std::size_t>(blk)] = amax / 127.0f;
      for (int64_t c = 32 * blk; c < 32 * blk + 32; ++c) xi[static_cast<std::size_t>(c)] = static_cast<int8_t>(std::nearbyint(xr[c] * inv));
    }
    float* dl = d_.data() + i * lanes;
    float* ul = sum_.data() + i * lanes;
    float* cl = correction_.data() + i * lanes;
    for (int64_t l = 0; l * lane_cols < L.cols; ++l) {
      const int64_t c0 = l * lane_cols;
      const float dc = d[static_cast<std::size_t>(c0 / 32)];
      double sum = 0, residue = 0;
      for (int64_t c = c0; c < c0 + lane_cols; ++c) {
        sum += xr[c];
        residue += static_cast<double>(xr[c]) - static_cast<double>(dc) * xi[static_cast<std::size_t>(c)];
      }
      dl[l] = dc;
      ul[l] = static_cast<float>(sum);
      cl[l] = L.bits == 4 ? static_cast<float>(8 * residue) : 0.0f;
    }
    // The kernel's order: 4 bits, per 64 columns the even columns then the odd ones.
    int8_t* out = q_.data() + i * L.padded;
    for (int64_t c = 0; c < L.cols; ++c) {
      const int64_t p = c - c % 64;
      out[L.bits == 4 ? p + (c - p) / 2 + 32 * ((c - p) % 2) : c] = xi[static_cast<std::size_t>(c)];
    }
  }
}

}  // namespace mlx_affine

using mlx_affine::extract;
using mlx_affine::Int8Activations;
using mlx_affine::load_scale;

void mlx_affine_int8_rows_scalar(const Int8Activations& a, const Weight& w, float* y, int64_t ldy, int64_t r0, int64_t r1) {
  const auto& L = a.layout();
  const int bits = L.bits, gs = w.quant.group_size;
  const int64_t G = L.cols / gs, lane_cols = L.lane_cols();
  const std::size_t stride = w.row_bytes();
  // x back in column order, once (the 4-bit values are stored by nibble plane).
  std::vector<int8_t> xc(static_cast<std::size_t>(a.rows() * L.padded));
  for (int64_t i = 0; i < a.rows(); ++i) {
    const int8_t* v = a.values(i);
    for (int64_t p = 0; p < L.padded; ++p)
      xc[static_cast<std::size_t>(i * L.padded + p)] = bits == 4 ? v[p - p % 64 + (p % 64) / 2 + 32 * (p % 2)] : v[p];
  }
  std::vector<int32_t> q(static_cast<std::size_t>(L.padded), 0);
  for (int64_t r = r0; r < r1; ++r) {
    const auto* row = reinterpret_cast<const uint8_t*>(w.data + static_cast<std::size_t>(r) * stride);
    for (int64_t c = 0; c < L.cols; ++c) q[static_cast<std::size_t>(c)] = static_cast<int32_t>(extract(row, c, bits)) - (bits == 8 ? 128 : 0);
    for (int64_t i = 0; i < a.rows(); ++i) {
      const int8_t* xi = xc.data() + i * L.padded;
      const float *d = a.lane_scales(i), *u = a.lane_sums(i), *corr = a.lane_corrections(i);
      float lanes[8] = {};
      for (int64_t k = 0; k < L.lanes(); ++k) {
        const int64_t c = k * lane_cols;
        int32_t isum = 0;
        for (int64_t t = c; t < c + lane_cols; ++t) isum += q[static_cast<std::size_t>(t)] * xi[t];
        const bool real = c < L.cols;  // 4 bits: a half block's padding lanes
        const float s = real ? load_scale(w.quant.scale_format, w.quant.scales, r * G + c / gs) : 0.0f;
        const float b = real ? load_scale(w.quant.scale_format, w.quant.biases, r * G + c / gs) : 0.0f;
        float& lane = lanes[k % 8];
        if (bits == 4) lane = std::fma(b, u[k], std::fma(std::fma(static_cast<float>(isum), d[k], corr[k]), s, lane));
        else lane = std::fma(std::fma(128.0f, s, b), u[k], std::fma(static_cast<float>(isum) * d[k], s, lane));
      }
      y[i * ldy + r] = reduce_lanes(lanes);
    }
  }
}

namespace {

#define QWENRT_AVX2 __attribute__((target("avx2,fma,f16c")))

// The 8 int32 lane sums of two 32-byte planes of 4-bit fields (u8) against their 32 int8 values
// each (vpmaddubsw pairs: at most 2 · 15 · 127 a plane, 7620 both: no int16 saturation).
QWENRT_AVX2 inline __m256i sums_q4(__m256i lo, __m256i hi, const int8_t* x) {
  const __m256i a = _mm256_maddubs_epi16(lo, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x)));
  const __m256i b = _mm256_maddubs_epi16(hi, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + 32)));
  return _mm256_madd_epi16(_mm256_add_epi16(a, b), _mm256_set1_epi16(1));
}

// The same for 32 fields q − 128 (as int8 `centred`, |q − 128| in `magnitude`): vpmaddubsw takes
// the magnitude (at most 128, unsigned) and the sign moves onto x (pairs at most 2 · 128 · 127).
QWENRT_AVX2 inline __m256i sums_q8(__m256i magnitude, __m256i centred, const int8_t* x) {
  const __m256i xs = _mm256_sign_epi8(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x)), centred);
  return _mm256_madd_epi16(_mm256_maddubs_epi16(magnitude, xs), _mm256_set1_epi16(1));
}

// Groups [g, g + n) of a row's scales or biases (n <= 8) as f32, zero past n: one load and a
// conversion for eight groups, where a lone element costs a scalar load, a conversion and a
// broadcast.
template <WeightFormat S>
QWENRT_AVX2 inline __m256 group_values(const std::byte* base, int64_t g, int64_t n) {
  constexpr std::size_t kBytes = S == WeightFormat::F32 ? 4 : 2;
  alignas(32) std::byte tail[32] = {};
  const std::byte* src = base + static_cast<std::size_t>(g) * kBytes;
  if (n < 8) src = static_cast<const std::byte*>(std::memcpy(tail, src, static_cast<std::size_t>(n) * kBytes));
  if constexpr (S == WeightFormat::F32) return _mm256_loadu_ps(reinterpret_cast<const float*>(src));
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src));
  if constexpr (S == WeightFormat::F16) return _mm256_cvtph_ps(h);
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

// What a tile reads of NX x rows, as plain pointers (no index arithmetic through the layout).
template <int NX>
struct XRows {
  const int8_t* v[NX];
  const float *d[NX], *u[NX], *c[NX];
  XRows(const Int8Activations& a, int64_t i0) {
    for (int i = 0; i < NX; ++i) {
      v[i] = a.values(i0 + i);
      d[i] = a.lane_scales(i0 + i);
      u[i] = a.lane_sums(i0 + i);
      c[i] = a.lane_corrections(i0 + i);
    }
  }
};

// The scales and biases (8 bits: b + 128 s) of weight rows r .. r + NW − 1, groups g0 .. g0 + 7
// (zero past the last), into sb: a tile refreshes them every 8 groups.
template <int B, WeightFormat S, int NW>
QWENRT_AVX2 inline void group_scales(const Weight& w, int64_t r, int64_t G, int64_t g0, float (&sb)[NW][2][8]) {
  const int64_t n = std::min<int64_t>(8, G - g0);
#pragma GCC unroll 8
  for (int j = 0; j < NW; ++j) {
    const __m256 s8 = group_values<S>(w.quant.scales, (r + j) * G + g0, n);
    __m256 b8 = group_values<S>(w.quant.biases, (r + j) * G + g0, n);
    if constexpr (B == 8) b8 = _mm256_fmadd_ps(_mm256_set1_ps(128.0f), s8, b8);
    _mm256_store_ps(sb[j][0], s8);
    _mm256_store_ps(sb[j][1], b8);
  }
}

// A register tile of NX x rows against NW weight rows over the full depth.
template <int B, WeightFormat S, int NX, int NW>
QWENRT_AVX2 void tile(const Int8Activations& a, int64_t i0, const Weight& w, int64_t r, float* y, int64_t ldy) {
  const auto& L = a.layout();
  const std::size_t stride = w.row_bytes();
  const int64_t G = L.cols / w.quant.group_size, cols = L.cols, padded = L.padded;
  const int gshift = std::countr_zero(static_cast<unsigned>(w.quant.group_size));  // 32, 64 or 128
  constexpr int64_t chunk = B == 4 ? 64 : 32, lane_cols = chunk / 8;
  const uint8_t* rows[NW];
#pragma GCC unroll 8
  for (int j = 0; j < NW; ++j) rows[j] = reinterpret_cast<const uint8_t*>(w.data + static_cast<std::size_t>(r + j) * stride);
  const XRows<NX> xr(a, i0);
  const auto& xv = xr.v;
  const auto &dv = xr.d, &uv = xr.u, &cv = xr.c;
  __m256 acc[NX][NW];
#pragma GCC unroll 8
  for (int i = 0; i < NX; ++i)
#pragma GCC unroll 8
    for (int j = 0; j < NW; ++j) acc[i][j] = _mm256_setzero_ps();
  // The scales and biases (8 bits: b + 128 s) of the rows' next 8 groups, refreshed every 8 groups.
  alignas(32) float sb[NW][2][8];
  int64_t g0 = 0;
  for (int64_t p = 0; p < padded; p += chunk) {
    if ((p & ((int64_t{8} << gshift) - 1)) == 0) group_scales<B, S, NW>(w, r, G, g0 = p >> gshift, sb);
    const int64_t k = (p >> gshift) - g0;  // this chunk's (first) group in sb
    const int64_t lane0 = p / lane_cols;
    // Decode: fetch the next tile's rows (contiguous after these) while this one runs.
    if constexpr (NX == 1) {
      if ((p * B / 8) % 64 == 0)
#pragma GCC unroll 8
        for (int j = 0; j < NW; ++j) _mm_prefetch(reinterpret_cast<const char*>(rows[j] + NW * stride + p * B / 8), _MM_HINT_T0);
    }
#pragma GCC unroll 8
    for (int j = 0; j < NW; ++j) {
      __m256 sv = _mm256_broadcast_ss(&sb[j][0][k]), bv = _mm256_broadcast_ss(&sb[j][1][k]);
      __m256i wa, wb;
      if constexpr (B == 4) {
        if (gshift == 5) {  // groups of 32: lanes 4-7 are the next group (zero past a half block's end)
          sv = _mm256_blend_ps(sv, _mm256_broadcast_ss(&sb[j][0][k + 1]), 0xF0);
          bv = _mm256_blend_ps(bv, _mm256_broadcast_ss(&sb[j][1][k + 1]), 0xF0);
        }
        const mlx_affine::NibblePlanes n = mlx_affine::nibble_planes(rows[j] + p / 2, cols - p < 64);
        wa = n.plane[0];
        wb = n.plane[1];
      } else {
        wb = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows[j] + p)), _mm256_set1_epi8(-128));
        wa = _mm256_abs_epi8(wb);
      }
#pragma GCC unroll 8
      for (int i = 0; i < NX; ++i) {
        const __m256 d = _mm256_loadu_ps(dv[i] + lane0), u = _mm256_loadu_ps(uv[i] + lane0);
        if constexpr (B == 4) {
          const __m256 t = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums_q4(wa, wb, xv[i] + p)), d, _mm256_loadu_ps(cv[i] + lane0));
          acc[i][j] = _mm256_fmadd_ps(bv, u, _mm256_fmadd_ps(t, sv, acc[i][j]));
        } else {
          const __m256 t = _mm256_mul_ps(_mm256_cvtepi32_ps(sums_q8(wa, wb, xv[i] + p)), d);
          acc[i][j] = _mm256_fmadd_ps(bv, u, _mm256_fmadd_ps(t, sv, acc[i][j]));
        }
      }
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < NX; ++i)
#pragma GCC unroll 8
    for (int j = 0; j < NW; ++j) y[i * ldy + j] = hsum8(acc[i][j]);
}

template <int B, WeightFormat S>
QWENRT_AVX2 void rows_avx2(const Int8Activations& a, const Weight& w, float* y, int64_t ldy, int64_t r0, int64_t r1) {
  for_each_row_tile(a.rows(), a.layout().padded, r0, r1,
                    [&]<int NX, int NW>(int64_t i, int64_t r) { tile<B, S, NX, NW>(a, i, w, r, y + i * ldy + r, ldy); });
}

// AVX-512 VNNI: the same sums, two weight rows to a 16-lane register (row 2p in lanes 0-7, row
// 2p + 1 in lanes 8-15, each x value broadcast to both halves) and the integer sums by vpdpbusd
// (u8 weights x s8 activations into int32, exact like vpmaddubsw / vpmaddwd): every lane does the
// float work the AVX2 tile does in the same order, so the bits are the AVX2 tile's and the scalar
// twin's.
// GCC 12's AVX-512 headers leave the unused lanes of some conversions and inserts undefined and
// then warn about it (GCC bug 105593, fixed in 13).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#define QWENRT_VNNI __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512vnni,avx2,fma,f16c")))

bool have_vnni() {
  static const bool ok = have_avx512() && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vnni");
  return ok;
}

QWENRT_VNNI inline __m512 halves(__m256 lo, __m256 hi) { return _mm512_insertf32x8(_mm512_zextps256_ps512(lo), hi, 1); }
QWENRT_VNNI inline __m512i halves(__m256i lo, __m256i hi) { return _mm512_inserti32x8(_mm512_zextsi256_si512(lo), hi, 1); }
QWENRT_VNNI inline __m512 both_halves(const float* p) { return _mm512_maskz_broadcast_f32x8(0xFFFF, _mm256_loadu_ps(p)); }
QWENRT_VNNI inline __m512i both_halves(const int8_t* p) {
  return _mm512_maskz_broadcast_i32x8(0xFFFF, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

// NX x rows against 2·NP weight rows over the full depth.
template <int B, WeightFormat S, int NX, int NP>
QWENRT_VNNI void tile_vnni(const Int8Activations& a, int64_t i0, const Weight& w, int64_t r, float* y, int64_t ldy) {
  constexpr int NW = 2 * NP;
  const auto& L = a.layout();
  const std::size_t stride = w.row_bytes();
  const int64_t G = L.cols / w.quant.group_size, cols = L.cols, padded = L.padded;
  const int gshift = std::countr_zero(static_cast<unsigned>(w.quant.group_size));
  constexpr int64_t chunk = B == 4 ? 64 : 32, lane_cols = chunk / 8;
  const uint8_t* rows[NW];
#pragma GCC unroll 8
  for (int j = 0; j < NW; ++j) rows[j] = reinterpret_cast<const uint8_t*>(w.data + static_cast<std::size_t>(r + j) * stride);
  const XRows<NX> xr(a, i0);
  const auto& xv = xr.v;
  const auto &dv = xr.d, &uv = xr.u, &cv = xr.c;
  __m512 acc[NX][NP];
#pragma GCC unroll 8
  for (int i = 0; i < NX; ++i)
#pragma GCC unroll 8
    for (int q = 0; q < NP; ++q) acc[i][q] = _mm512_setzero_ps();
  alignas(32) float sb[NW][2][8];
  int64_t g0 = 0;
  for (int64_t p = 0; p < padded; p += chunk) {
    if ((p & ((int64_t{8} << gshift) - 1)) == 0) group_scales<B, S, NW>(w, r, G, g0 = p >> gshift, sb);
    const int64_t k = (p >> gshift) - g0;
    const int64_t lane0 = p / lane_cols;
    if constexpr (NX == 1) {
      if ((p * B / 8) % 64 == 0)
#pragma GCC unroll 8
        for (int j = 0; j < NW; ++j) _mm_prefetch(reinterpret_cast<const char*>(rows[j] + NW * stride + p * B / 8), _MM_HINT_T0);
    }
    // This chunk's x: the int8 values (both halves), d, Σx and the correction of each x row.
#pragma GCC unroll 8
    for (int q = 0; q < NP; ++q) {
      __m256 s2[2], b2[2];
      __m256i wa2[2], wb2[2];
#pragma GCC unroll 2
      for (int h = 0; h < 2; ++h) {
        const int j = 2 * q + h;
        s2[h] = _mm256_broadcast_ss(&sb[j][0][k]);
        b2[h] = _mm256_broadcast_ss(&sb[j][1][k]);
        if constexpr (B == 4) {
          if (gshift == 5) {
            s2[h] = _mm256_blend_ps(s2[h], _mm256_broadcast_ss(&sb[j][0][k + 1]), 0xF0);
            b2[h] = _mm256_blend_ps(b2[h], _mm256_broadcast_ss(&sb[j][1][k + 1]), 0xF0);
          }
          const mlx_affine::NibblePlanes n = mlx_affine::nibble_planes(rows[j] + p / 2, cols - p < 64);
          wa2[h] = n.plane[0];
          wb2[h] = n.plane[1];
        } else {
          wb2[h] = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows[j] + p)), _mm256_set1_epi8(-128));
          wa2[h] = _mm256_abs_epi8(wb2[h]);
        }
      }
      const __m512 sv = halves(s2[0], s2[1]), bv = halves(b2[0], b2[1]);
      const __m512i wa = halves(wa2[0], wa2[1]), wb = halves(wb2[0], wb2[1]);
      // 8 bits: the sign of q − 128 moves onto x, as vpsignb does in the AVX2 tile (x is never
      // −128; where q − 128 = 0 the magnitude is 0 and the product too).
      const __mmask64 negative = B == 8 ? _mm512_movepi8_mask(wb) : 0;
#pragma GCC unroll 8
      for (int i = 0; i < NX; ++i) {
        const __m512 d = both_halves(dv[i] + lane0), u = both_halves(uv[i] + lane0);
        if constexpr (B == 4) {
          __m512i isum = _mm512_dpbusd_epi32(_mm512_setzero_si512(), wa, both_halves(xv[i] + p));
          isum = _mm512_dpbusd_epi32(isum, wb, both_halves(xv[i] + p + 32));
          const __m512 t = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), d, both_halves(cv[i] + lane0));
          acc[i][q] = _mm512_fmadd_ps(bv, u, _mm512_fmadd_ps(t, sv, acc[i][q]));
        } else {
          const __m512i x = both_halves(xv[i] + p);
          const __m512i xs = _mm512_mask_sub_epi8(x, negative, _mm512_setzero_si512(), x);
          const __m512i isum = _mm512_dpbusd_epi32(_mm512_setzero_si512(), wa, xs);
          const __m512 t = _mm512_mul_ps(_mm512_cvtepi32_ps(isum), d);
          acc[i][q] = _mm512_fmadd_ps(bv, u, _mm512_fmadd_ps(t, sv, acc[i][q]));
        }
      }
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < NX; ++i)
#pragma GCC unroll 8
    for (int q = 0; q < NP; ++q) {
      y[i * ldy + 2 * q] = hsum8(_mm512_castps512_ps256(acc[i][q]));
      y[i * ldy + 2 * q + 1] = hsum8(_mm512_maskz_extractf32x8_ps(0xFF, acc[i][q], 1));
    }
}

// Decode rows 8 weight rows at a time, windows 4 x rows by 4 weight rows; a row left in a 16-row
// block takes the AVX2 tile (same bits).
template <int B, WeightFormat S>
QWENRT_VNNI void rows_vnni(const Int8Activations& a, const Weight& w, float* y, int64_t ldy, int64_t r0, int64_t r1) {
  for_each_paired_tile<2>(
      a.rows(), a.layout().padded, r0, r1, [&]<int NX, int NP>(int64_t i, int64_t r) { tile_vnni<B, S, NX, NP>(a, i, w, r, y + i * ldy + r, ldy); },
      [&](int64_t i, int64_t r) { tile<B, S, 1, 1>(a, i, w, r, y + i * ldy + r, ldy); });
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

}  // namespace

void mlx_affine_int8_rows(const Int8Activations& a, const Weight& w, float* y, int64_t ldy, int64_t r0, int64_t r1) {
  if (!(a.layout() == Int8Activations::layout_of(w))) fail("internal: int8 activations prepared for another matrix");
  if (!have_avx2()) return mlx_affine_int8_rows_scalar(a, w, y, ldy, r0, r1);
  const bool vnni = have_vnni();
  with_scale_format(w.quant.scale_format, [&]<WeightFormat S>() {
    if (w.quant.bits == 4) vnni ? rows_vnni<4, S>(a, w, y, ldy, r0, r1) : rows_avx2<4, S>(a, w, y, ldy, r0, r1);
    else vnni ? rows_vnni<8, S>(a, w, y, ldy, r0, r1) : rows_avx2<8, S>(a, w, y, ldy, r0, r1);
  });
}

}  // namespace qwenrt::cpu
