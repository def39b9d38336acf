#pragma once
// A random block-scaled FP8 matrix for the CPU kernel tests: e4m3 codes (the NaN codes skipped,
// as a quantizer never writes them) and one random scale per br x bc tile in the given format.
// row_offset puts the view's row 0 inside the grid, as a thread's or a split projection's slice.
#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

#include "backend/weight.h"
#include "core/half.h"

namespace qwenrt::test {

struct Fp8Matrix {
  std::vector<uint8_t> q;
  std::vector<std::byte> scales;
  Weight w;
};

inline Fp8Matrix random_fp8_matrix(int64_t rows, int64_t cols, int br, int bc, WeightFormat sf, std::mt19937& rng, int64_t row_offset = 0) {
  Fp8Matrix m;
  std::uniform_int_distribution<int> code(0, 255);
  for (int64_t i = 0; i < rows * cols; ++i) {
    int c = code(rng);
    if ((c & 0x7F) == 0x7F) c &= 0xFE;
    m.q.push_back(static_cast<uint8_t>(c));
  }
  const int64_t gr = (row_offset + rows + br - 1) / br, gc = (cols + bc - 1) / bc;
  std::uniform_real_distribution<float> sd(-3e-3f, 3e-3f);
  for (int64_t i = 0; i < gr * gc; ++i) {
    const float s = sd(rng);
    if (sf == WeightFormat::F32) {
      const auto* b = reinterpret_cast<const std::byte*>(&s);
      m.scales.insert(m.scales.end(), b, b + 4);
    } else {
      const uint16_t h = sf == WeightFormat::BF16 ? f32_to_bf16(s) : f32_to_f16(s);
      const auto* b = reinterpret_cast<const std::byte*>(&h);
      m.scales.insert(m.scales.end(), b, b + 2);
    }
  }
  m.w = {WeightFormat::Fp8Block, rows, cols, reinterpret_cast<const std::byte*>(m.q.data())};
  m.w.fp8 = {br, bc, sf, m.scales.data(), gc, row_offset};
  return m;
}

}  // namespace qwenrt::test
