#pragma once
// A random MLX affine matrix for the CPU kernel tests: q values packed LSB first into a bitstream
// per row (the layout mlx.core.quantize writes), bf16 scales of both signs and bf16 biases.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

#include "backend/weight.h"
#include "core/half.h"

namespace qwenrt::test {

struct AffineMatrix {
  std::vector<uint32_t> words;
  std::vector<uint16_t> scales, biases;
  std::vector<uint32_t> q;  // [rows, cols]
  Weight w;

  float scale(int64_t r, int64_t c) const { return bf16_to_f32(scales[group(r, c)]); }
  float bias(int64_t r, int64_t c) const { return bf16_to_f32(biases[group(r, c)]); }
  uint32_t field(int64_t r, int64_t c) const { return q[static_cast<std::size_t>(r * w.cols + c)]; }
  // The dequantized value, fma(s, q, b) in f32 as mlx computes it.
  float value(int64_t r, int64_t c) const { return std::fma(scale(r, c), static_cast<float>(field(r, c)), bias(r, c)); }

 private:
  std::size_t group(int64_t r, int64_t c) const { return static_cast<std::size_t>(r * (w.cols / w.quant.group_size) + c / w.quant.group_size); }
};

inline AffineMatrix random_affine_matrix(int bits, int gs, int64_t rows, int64_t cols, std::mt19937& rng) {
  AffineMatrix p;
  const int64_t wpr = cols * bits / 32, groups = cols / gs;
  p.words.assign(static_cast<std::size_t>(rows * wpr), 0);
  p.q.resize(static_cast<std::size_t>(rows * cols));
  std::uniform_int_distribution<uint32_t> qd(0, (1u << bits) - 1);
  std::normal_distribution<float> nd(0.0f, 0.05f);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const uint32_t q = qd(rng);
      p.q[static_cast<std::size_t>(r * cols + c)] = q;
      for (int b = 0; b < bits; ++b) {
        const int64_t bit = c * bits + b;
        if ((q >> b) & 1) p.words[static_cast<std::size_t>(r * wpr + bit / 32)] |= 1u << (bit % 32);
      }
    }
  for (int64_t i = 0; i < rows * groups; ++i) {
    p.scales.push_back(f32_to_bf16(nd(rng)));  // negative scales too, as current MLX writes
    p.biases.push_back(f32_to_bf16(nd(rng) * 8));
  }
  p.w = {WeightFormat::MlxAffine, rows, cols, reinterpret_cast<const std::byte*>(p.words.data())};
  p.w.quant = {bits, gs, WeightFormat::BF16, reinterpret_cast<const std::byte*>(p.scales.data()),
               reinterpret_cast<const std::byte*>(p.biases.data())};
  return p;
}

}  // namespace qwenrt::test
