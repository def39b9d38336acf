// Blocked prompt-window products over MLX affine weights: a panel is the weight rows dequantized
// once per k-block, w = fma(scale, q, bias) in f32 in the position order of mlx_affine_positions.h
// (the values and the order the row kernels use, matmul_mlx_affine.cpp), then reused by every x
// row of the block, which reads x in that order too.
#include <immintrin.h>

#include <cmath>

#include "backend/cpu/matmul_blocked.h"
#include "backend/cpu/matmul_blocked_driver.h"
#include "backend/cpu/mlx_affine_positions.h"
#include "backend/cpu/mlx_affine_unpack.h"
#include "core/error.h"

namespace qwenrt::cpu {

namespace {

using mlx_affine::load_scale;

// Where position p of weight row j goes in a panel laid out [kc / 8][nr][8].
float* panel_at(float* dst, int nr, int j, int64_t p) { return dst + (p / 8 * nr + j) * 8 + p % 8; }

void pack_scalar(const Weight& w, int64_t r, int nr, int64_t p0, int64_t kc, float* dst) {
  const mlx_affine::Positions P = mlx_affine::positions(w);
  const int bits = w.quant.bits, gs = w.quant.group_size;
  const int64_t groups = w.cols / gs;
  for (int j = 0; j < nr; ++j) {
    const auto* row = reinterpret_cast<const uint8_t*>(w.data + static_cast<std::size_t>(r + j) * w.row_bytes());
    for (int64_t p = 0; p < kc; ++p) {
      const int64_t c = mlx_affine::column_at(P, p0 + p);
      if (c >= w.cols) {
        *panel_at(dst, nr, j, p) = 0.0f;
        continue;
      }
      const int64_t g = (r + j) * groups + c / gs;
      const float s = load_scale(w.quant.scale_format, w.quant.scales, g), b = load_scale(w.quant.scale_format, w.quant.biases, g);
      *panel_at(dst, nr, j, p) = std::fma(s, static_cast<float>(mlx_affine::extract(row, c, bits)), b);
    }
  }
}

#define QWENRT_AVX2 __attribute__((target("avx2,fma,f16c")))

template <int B>
QWENRT_AVX2 void pack_avx2(const Weight& w, int64_t r, int nr, int64_t c0, int64_t kc, float* dst) {
  const int gs = w.quant.group_size;
  const int64_t groups = w.cols / gs;
  for (int j = 0; j < nr; ++j) {
    const auto* row = reinterpret_cast<const uint8_t*>(w.data + static_cast<std::size_t>(r + j) * w.row_bytes());
    for (int64_t g0 = c0; g0 < c0 + kc; g0 += gs) {  // c0 and kc are multiples of the group size
      const int64_t gi = (r + j) * groups + g0 / gs;
      const __m256 sv = _mm256_set1_ps(load_scale(w.quant.scale_format, w.quant.scales, gi));
      const __m256 bv = _mm256_set1_ps(load_scale(w.quant.scale_format, w.quant.biases, gi));
      for (int64_t c = g0; c < g0 + gs; c += 8)
        _mm256_store_ps(panel_at(dst, nr, j, c - c0), _mm256_fmadd_ps(sv, _mm256_cvtepi32_ps(mlx_affine::unpack8<B>(row, c)), bv));
    }
  }
}

// 4-bit: per 64 positions the two nibble planes and their byte shuffles, as the row kernel's
// tile_q4 (lanes 0-3 and 4-7 two groups where groups are 32 columns, zero past the last column).
QWENRT_AVX2 void pack_q4_avx2(const Weight& w, int64_t r, int nr, int64_t p0, int64_t kc, float* dst) {
  const int gs = w.quant.group_size;
  const int64_t groups = w.cols / gs;
  for (int j = 0; j < nr; ++j) {
    const auto* row = reinterpret_cast<const uint8_t*>(w.data + static_cast<std::size_t>(r + j) * w.row_bytes());
    for (int64_t p = p0; p < p0 + kc; p += 64) {
      const bool half = w.cols - p < 64;
      const int64_t gi = (r + j) * groups + p / gs;
      __m256 sv = _mm256_set1_ps(load_scale(w.quant.scale_format, w.quant.scales, gi));
      __m256 bv = _mm256_set1_ps(load_scale(w.quant.scale_format, w.quant.biases, gi));
      if (gs == 32) {
        sv = _mm256_blend_ps(sv, half ? _mm256_setzero_ps() : _mm256_set1_ps(load_scale(w.quant.scale_format, w.quant.scales, gi + 1)), 0xF0);
        bv = _mm256_blend_ps(bv, half ? _mm256_setzero_ps() : _mm256_set1_ps(load_scale(w.quant.scale_format, w.quant.biases, gi + 1)), 0xF0);
      }
      const mlx_affine::NibblePlanes planes = mlx_affine::nibble_planes(row + p / 2, half);
      for (int t = 0; t < 8; ++t)
        _mm256_store_ps(panel_at(dst, nr, j, p - p0 + 8 * t), _mm256_fmadd_ps(sv, _mm256_cvtepi32_ps(mlx_affine::nibble_lanes(planes, t)), bv));
    }
  }
}

blocked::PackPanel pack_avx2_for(int bits) {
  switch (bits) {
    case 2: return pack_avx2<2>;
    case 3: return pack_avx2<3>;
    case 4: return pack_q4_avx2;
    case 5: return pack_avx2<5>;
    case 6: return pack_avx2<6>;
    case 8: return pack_avx2<8>;
    default: fail("internal: MLX affine matrix with ", bits, " bits");
  }
}

void check(const mlx_affine::Activations& a, const Weight& w) {
  if (!(a.positions() == mlx_affine::positions(w))) fail("internal: MLX affine activations prepared for another matrix");
  static_assert(blocked::kKBlock % 64 == 0, "4-bit blocks of 64 positions never straddle a k-block");
  if (blocked::kKBlock % w.quant.group_size != 0)
    fail("internal: MLX affine group size ", w.quant.group_size, " does not divide the k-block");
}

void run(const mlx_affine::Activations& a, const Weight& w, float* y, int64_t ldy, int64_t r0, int64_t r1, bool avx2) {
  check(a, w);
  blocked::run(avx2 ? pack_avx2_for(w.quant.bits) : pack_scalar, nullptr, avx2, a.data(), a.rows(), a.positions().padded, w, y, ldy, r0, r1);
}

}  // namespace

void mlx_affine_rows_blocked(const mlx_affine::Activations& a, const Weight& w, float* y, int64_t ldy, int64_t r0, int64_t r1) {
  run(a, w, y, ldy, r0, r1, have_avx2());
}

void mlx_affine_rows_blocked(const float* x, int64_t n, int64_t k, const Weight& w, float* y, int64_t ldy, int64_t r0, int64_t r1) {
  if (k != w.cols) fail("internal: MLX affine product over ", k, " columns of a ", w.cols, "-column matrix");
  run(mlx_affine::Activations(x, n, mlx_affine::positions(w)), w, y, ldy, r0, r1, have_avx2());
}

void mlx_affine_rows_blocked_scalar(const float* x, int64_t n, int64_t k, const Weight& w, float* y, int64_t ldy, int64_t r0, int64_t r1) {
  if (k != w.cols) fail("internal: MLX affine product over ", k, " columns of a ", w.cols, "-column matrix");
  run(mlx_affine::Activations(x, n, mlx_affine::positions(w)), w, y, ldy, r0, r1, false);
}

}  // namespace qwenrt::cpu
