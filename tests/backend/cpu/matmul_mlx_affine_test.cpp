// MLX affine products: unpacking of every width against an independent bit reader, the AVX2 kernel
// against its scalar twin (same bits), batch invariance, and the double reference (which also
// checks the 4-bit position order: a wrong column for a position would miss it by far).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "backend/cpu/matmul.h"
#include "backend/cpu/matmul_formats.h"
#include "support/random_mlx_affine_matrix.h"

namespace qwenrt {
namespace {

using Packed = test::AffineMatrix;

float expected(const Packed& p, int64_t r, int64_t c) { return p.value(r, c); }

Packed make(int bits, int gs, int64_t rows, int64_t cols, std::mt19937& rng) { return test::random_affine_matrix(bits, gs, rows, cols, rng); }

struct Case {
  int bits, gs;
};

class MlxAffineMatmul : public ::testing::TestWithParam<Case> {};

TEST_P(MlxAffineMatmul, RowsDequantizeToScaleTimesQPlusBias) {
  std::mt19937 rng(7);
  const auto [bits, gs] = GetParam();
  Packed p = make(bits, gs, 5, 2 * 128, rng);
  std::vector<float> row(static_cast<std::size_t>(p.w.cols));
  for (int64_t r = 0; r < p.w.rows; ++r) {
    p.w.row_to_f32(r, row.data());
    for (int64_t c = 0; c < p.w.cols; ++c) ASSERT_EQ(row[static_cast<std::size_t>(c)], expected(p, r, c)) << "row " << r << " col " << c;
  }
  // A row slice (one expert of a fused tensor) reads its own rows, scales and biases.
  Weight s = p.w.row_slice(3, 2);
  s.row_to_f32(1, row.data());
  for (int64_t c = 0; c < p.w.cols; ++c) ASSERT_EQ(row[static_cast<std::size_t>(c)], expected(p, 4, c));
}

TEST_P(MlxAffineMatmul, Avx2EqualsScalarBatchInvariantAndMatchesDouble) {
  std::mt19937 rng(11);
  const auto [bits, gs] = GetParam();
  ThreadPool pool(2);
  // 3 groups: for 4-bit groups of 32 the last 64-column block ends half-way (zero padding).
  for (auto [n, rows, cols] : {std::tuple{1, 37, 128}, {3, 9, 256}, {5, 70, 384}, {9, 16, 128}, {2, 13, 3 * gs}}) {
    Packed p = make(bits, gs, rows, cols, rng);
    std::vector<float> x(static_cast<std::size_t>(n * cols)), y(static_cast<std::size_t>(n * rows)), ys(y.size());
    std::normal_distribution<float> nd;
    for (auto& v : x) v = nd(rng);
    cpu::matmul(x.data(), n, p.w, y.data(), pool);
    cpu::mlx_affine_rows_scalar(x.data(), n, cols, p.w, ys.data(), rows, 0, rows);
    ASSERT_EQ(std::memcmp(y.data(), ys.data(), y.size() * 4), 0) << cpu::matmul_isa() << " kernel differs from the scalar twin";
    for (int i = 0; i < n; ++i) {
      std::vector<float> alone(static_cast<std::size_t>(rows));
      cpu::matmul(x.data() + i * cols, 1, p.w, alone.data(), pool);
      ASSERT_EQ(std::memcmp(alone.data(), y.data() + i * rows, alone.size() * 4), 0) << "row " << i << " of " << n;
    }
    double err = 0, norm = 0;
    for (int i = 0; i < n; ++i)
      for (int r = 0; r < rows; ++r) {
        double ref = 0;
        for (int c = 0; c < cols; ++c) ref += static_cast<double>(x[i * cols + c]) * expected(p, r, c);
        err += (y[i * rows + r] - ref) * (y[i * rows + r] - ref);
        norm += ref * ref;
      }
    EXPECT_LT(std::sqrt(err / norm), 1e-6);
  }
}

INSTANTIATE_TEST_SUITE_P(Widths, MlxAffineMatmul,
                         ::testing::Values(Case{2, 64}, Case{3, 64}, Case{4, 64}, Case{5, 32}, Case{6, 128}, Case{8, 32}, Case{4, 128}, Case{3, 32},
                                           Case{4, 32}),
                         [](const auto& info) { return "b" + std::to_string(info.param.bits) + "_g" + std::to_string(info.param.gs); });

}  // namespace
}  // namespace qwenrt
