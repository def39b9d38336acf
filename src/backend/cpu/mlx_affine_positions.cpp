#include "backend/cpu/mlx_affine_positions.h"

#include "core/error.h"

namespace qwenrt::cpu::mlx_affine {

Positions positions(const Weight& w) {
  const int gs = w.quant.group_size;
  if (gs <= 0 || w.cols % gs != 0) fail("internal: MLX affine matrix with ", w.cols, " columns, not a multiple of its group size ", gs);
  Positions P;
  P.nibble_planes = w.quant.bits == 4;
  P.cols = w.cols;
  P.padded = P.nibble_planes ? (w.cols + 63) / 64 * 64 : w.cols;
  return P;
}

Activations::Activations(const float* x, int64_t n, const Positions& P) : positions_(P), n_(n), xp_(x) {
  if (!P.nibble_planes) return;
  copy_.resize(static_cast<std::size_t>(n * P.padded));
  for (int64_t i = 0; i < n; ++i) {
    const float* xr = x + i * P.cols;
    float* out = copy_.data() + i * P.padded;
    for (int64_t b = 0; b < P.padded; b += 64)  // the block's positions, as column_at lays them
      for (int t = 0; t < 8; ++t)
        for (int l = 0; l < 8; ++l) {
          const int64_t c = b + 32 * (l / 4) + 2 * (4 * (t % 4) + l % 4) + t / 4;
          out[b + 8 * t + l] = c < P.cols ? xr[c] : 0.0f;
        }
  }
  xp_ = copy_.data();
}

}  // namespace qwenrt::cpu::mlx_affine
