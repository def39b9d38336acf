#include "backend/cpu/ops.h"

namespace qwenrt::cpu {

void rms_norm(const float* x, const float* w, float* y, int64_t n, float eps) {
  double ss = 0;
  for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(x[i]) * x[i];
  const float inv = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(n) + eps));
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * inv * w[i];
}

void l2_normalize(float* x, int64_t n, float eps, float scale) {
  double ss = 0;
  for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(x[i]) * x[i];
  const float inv = static_cast<float>(1.0 / std::sqrt(ss + eps)) * scale;
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

void rope_rotate_half(float* x, const float* cos, const float* sin, int64_t rotary_dim) {
  const int64_t half = rotary_dim / 2;
  for (int64_t d = 0; d < half; ++d) {
    const float a = x[d], b = x[d + half];
    x[d] = a * cos[d] - b * sin[d];
    x[d + half] = b * cos[d] + a * sin[d];
  }
}

}  // namespace qwenrt::cpu
