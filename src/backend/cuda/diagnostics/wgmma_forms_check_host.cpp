// Host side of wgmma_forms_check: inputs and the plain products the GPU's are compared with.
#include <cmath>
#include <random>

#include "backend/cuda/diagnostics/wgmma_forms_check.h"
#include "core/half.h"

namespace qwenrt::cuda {
namespace {

double relative_l2(const std::vector<float>& got, const std::vector<double>& want) {
  double e = 0, n = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    e += (got[i] - want[i]) * (got[i] - want[i]);
    n += want[i] * want[i];
  }
  return std::isfinite(e) ? std::sqrt(e / n) : INFINITY;
}

}  // namespace

WgmmaFormsData make_wgmma_forms_data(unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  WgmmaFormsData d;
  auto fill = [&](std::vector<uint16_t>& m, std::size_t n) {
    m.resize(n);
    for (auto& x : m) x = f32_to_bf16(normal(rng));
  };
  fill(d.q, 64 * 256);
  fill(d.k, 64 * 256);
  fill(d.v, 64 * 256);
  fill(d.p, 64 * 64);
  fill(d.w, 64 * 128);
  fill(d.s0, 128 * 64);
  fill(d.dt, 64 * 64);
  fill(d.x, 64 * 64);
  d.init.resize(64 * 64);
  for (auto& x : d.init) x = static_cast<float>(bf16_to_f32(f32_to_bf16(normal(rng))));
  d.s.assign(64 * 64, NAN);
  d.o.assign(64 * 256, NAN);
  d.d1.assign(64 * 64, NAN);
  d.d2.assign(64 * 64, NAN);
  return d;
}

WgmmaFormsErrors wgmma_forms_errors(const WgmmaFormsData& d) {
  std::vector<double> s(64 * 64), o(64 * 256), d1(64 * 64), d2(64 * 64);
  for (int r = 0; r < 64; ++r) {
    for (int c = 0; c < 64; ++c) {
      double a = 0, b = d.init[r * 64 + c], x = 0;
      for (int i = 0; i < 256; ++i) a += bf16_to_f32(d.q[r * 256 + i]) * bf16_to_f32(d.k[c * 256 + i]);
      for (int i = 0; i < 128; ++i) b += bf16_to_f32(d.w[r * 128 + i]) * bf16_to_f32(d.s0[i * 64 + c]);
      for (int i = 0; i < 64; ++i) x += bf16_to_f32(d.x[r * 64 + i]) * bf16_to_f32(d.dt[c * 64 + i]);
      s[r * 64 + c] = a;
      d1[r * 64 + c] = b;
      d2[r * 64 + c] = x;
    }
    for (int c = 0; c < 256; ++c) {
      double a = 0;
      for (int i = 0; i < 64; ++i) a += bf16_to_f32(d.p[r * 64 + i]) * bf16_to_f32(d.v[i * 256 + c]);
      o[r * 256 + c] = a;
    }
  }
  return {relative_l2(d.s, s), relative_l2(d.o, o), relative_l2(d.d1, d1), relative_l2(d.d2, d2)};
}

}  // namespace qwenrt::cuda
