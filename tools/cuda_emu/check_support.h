#pragma once
// What the emulator's checks share: random bf16 operands and the relative L2 error against a
// double reference.
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "cuda_bf16.h"

// n bf16 values drawn from N(0, scale²).
inline std::vector<uint16_t> random_bf16(std::size_t n, std::mt19937& rng, float scale = 1.0f) {
  std::normal_distribution<float> nd(0.0f, scale);
  std::vector<uint16_t> v(n);
  for (auto& x : v) x = emu_f2bf(nd(rng));
  return v;
}

inline double rel_l2(const std::vector<float>& got, const std::vector<double>& ref) {
  double e = 0, n = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    const double d = got[i] - ref[i];
    e += d * d;
    n += ref[i] * ref[i];
  }
  return std::sqrt(e / n);
}
