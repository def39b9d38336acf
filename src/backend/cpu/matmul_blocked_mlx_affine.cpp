// Blocked prompt-window products over MLX affine weights: a panel is the weight rows dequantized
// once per k-block, w = fma(scale, q, bias) in f32, the value the row kernels compute in registers
// (matmul_mlx_affine.cpp), then reused by every x row of the block.
#include <immintrin.h>

#include <cmath>

#include "backend/cpu/matmul_blocked.h"
#include "backend/cpu/matmul_blocked_driver.h"
#include "backend/cpu/mlx_affine_unpack.h"
#include "core/error.h"

namespace qwenrt::cpu {

namespace {

using mlx_affine::load_scale;

void pack_scalar(const Weight& w, int64_t r, int nr, int64_t c0, int64_t kc, float* dst) {
  const int bits = w.quant.bits, gs = w.quant.group_size;
  const int64_t groups = w.cols / gs;
  for (int j = 0; j < nr; ++j) {
    const auto* row = reinterpret_cast<const uint8_t*>(w.data + static_cast<std::size_t>(r + j) * w.row_bytes());
    for (int64_t c = 0; c < kc; ++c) {
      const int64_t g = (r + j) * groups + (c0 + c) / gs;
      const float s = load_scale(w.quant.scale_format, w.quant.scales, g), b = load_scale(w.quant.scale_format, w.quant.biases, g);
      dst[(c / 8 * nr + j) * 8 + c % 8] = std::fma(s, static_cast<float>(mlx_affine::extract(row, c0 + c, bits)), b);
    }
  }
}

template <int B>
__attribute__((target("avx2,fma,f16c"))) void pack_avx2(const Weight& w, int64_t r, int nr, int64_t c0, int64_t kc, float* dst) {
  const int gs = w.quant.group_size;
  const int64_t groups = w.cols / gs;
  for (int j = 0; j < nr; ++j) {
    const auto* row = reinterpret_cast<const uint8_t*>(w.data + static_cast<std::size_t>(r + j) * w.row_bytes());
    for (int64_t g0 = c0; g0 < c0 + kc; g0 += gs) {  // c0 and kc are multiples of the group size
      const int64_t gi = (r + j) * groups + g0 / gs;
      const __m256 sv = _mm256_set1_ps(load_scale(w.quant.scale_format, w.quant.scales, gi));
      const __m256 bv = _mm256_set1_ps(load_scale(w.quant.scale_format, w.quant.biases, gi));
      for (int64_t c = g0; c < g0 + gs; c += 8)
        _mm256_store_ps(dst + ((c - c0) / 8 * nr + j) * 8, _mm256_fmadd_ps(sv, _mm256_cvtepi32_ps(mlx_affine::unpack8<B>(row, c)), bv));
    }
  }
}

blocked::PackPanel pack_avx2_for(int bits) {
  switch (bits) {
    case 2: return pack_avx2<2>;
    case 3: return pack_avx2<3>;
    case 4: return pack_avx2<4>;
    case 5: return pack_avx2<5>;
    case 6: return pack_avx2<6>;
    case 8: return pack_avx2<8>;
    default: fail("internal: MLX affine matrix with ", bits, " bits");
  }
}

void check(int64_t k, const Weight& w) {
  if (k % w.quant.group_size != 0) fail("internal: MLX affine matrix with ", k, " columns, not a multiple of its group size ", w.quant.group_size);
  if (blocked::kKBlock % w.quant.group_size != 0) fail("internal: MLX affine group size ", w.quant.group_size, " does not divide the k-block");
}

}  // namespace

void mlx_affine_rows_blocked(const float* x, int64_t n, int64_t k, const Weight& w, float* y, int64_t ldy, int64_t r0, int64_t r1) {
  if (!have_avx2()) return mlx_affine_rows_blocked_scalar(x, n, k, w, y, ldy, r0, r1);
  check(k, w);
  blocked::run(pack_avx2_for(w.quant.bits), nullptr, true, x, n, k, w, y, ldy, r0, r1);
}

void mlx_affine_rows_blocked_scalar(const float* x, int64_t n, int64_t k, const Weight& w, float* y, int64_t ldy, int64_t r0, int64_t r1) {
  check(k, w);
  blocked::run(pack_scalar, nullptr, false, x, n, k, w, y, ldy, r0, r1);
}

}  // namespace qwenrt::cpu
