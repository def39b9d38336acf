// Products over 4- and 8-bit MLX affine weights with int8 activations (mlx_affine_int8.h): the AVX2
// kernel against its scalar twin (same bits), batch and row-range invariance, the definition
// computed in double (x rounded per 32 columns, q centred, the bias term on the exact x), and the
// switch: off, or for other widths, products stay the exact ones.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <tuple>
#include <vector>

#include "backend/cpu/matmul.h"
#include "backend/cpu/matmul_formats.h"
#include "backend/cpu/mlx_affine_int8.h"
#include "support/random_mlx_affine_matrix.h"

namespace qwenrt {
namespace {

using test::AffineMatrix;

// Turns the mode on for a scope.
struct Int8Scope {
  Int8Scope() { cpu::set_int8_activations(true); }
  ~Int8Scope() { cpu::set_int8_activations(false); }
};

// x rounded as the definition says: per 32 columns d = amax / 127, xi = nearbyint(x · (127 / amax)).
std::vector<double> rounded(const std::vector<float>& x, int64_t cols) {
  std::vector<double> out(x.size());
  for (std::size_t b = 0; b < x.size(); b += 32) {
    float amax = 0.0f;
    for (std::size_t c = b; c < b + 32; ++c) amax = std::max(amax, std::fabs(x[c]));
    const float inv = amax > 0 ? 127.0f / amax : 0.0f, d = amax / 127.0f;
    for (std::size_t c = b; c < b + 32; ++c) out[c] = static_cast<double>(d) * std::nearbyint(x[c] * inv);
  }
  (void)cols;
  return out;
}

// Σ_c s (q − c0) x̂ + (b + c0 s) x in double.
double defined(const AffineMatrix& p, int64_t r, const float* x, const double* xh) {
  const double c0 = p.w.quant.bits == 4 ? 8 : 128;
  double y = 0;
  for (int64_t c = 0; c < p.w.cols; ++c) {
    const double s = p.scale(r, c), b = p.bias(r, c);
    y += s * (static_cast<double>(p.field(r, c)) - c0) * xh[c] + (b + c0 * s) * x[c];
  }
  return y;
}

double relative_l2(const std::vector<float>& y, const std::vector<double>& ref) {
  double err = 0, norm = 0;
  for (std::size_t i = 0; i < y.size(); ++i) {
    err += (y[i] - ref[i]) * (y[i] - ref[i]);
    norm += ref[i] * ref[i];
  }
  return std::sqrt(err / norm);
}

struct Case {
  int bits, gs;
};

class Int8ActivationsMatmul : public ::testing::TestWithParam<Case> {};

TEST_P(Int8ActivationsMatmul, Avx2EqualsScalarBatchInvariantAndMatchesTheDefinition) {
  std::mt19937 rng(23);
  const auto [bits, gs] = GetParam();
  ThreadPool pool(2);
  Int8Scope int8;
  // 3 groups: for 4-bit groups of 32 the last 64-column block ends half-way (zero padding).
  for (auto [n, rows, cols] : {std::tuple{1, 37, 128}, {3, 9, 256}, {5, 70, 384}, {9, 16, 128}, {2, 13, 3 * gs}}) {
    const AffineMatrix p = test::random_affine_matrix(bits, gs, rows, cols, rng);
    std::vector<float> x(static_cast<std::size_t>(n * cols)), y(static_cast<std::size_t>(n * rows)), ys(y.size());
    std::normal_distribution<float> nd;
    for (auto& v : x) v = nd(rng);
    cpu::matmul(x.data(), n, p.w, y.data(), pool);
    const cpu::mlx_affine::Int8Activations a(x.data(), n, cpu::mlx_affine::Int8Activations::layout_of(p.w));
    cpu::mlx_affine_int8_rows_scalar(a, p.w, ys.data(), rows, 0, rows);
    ASSERT_EQ(std::memcmp(y.data(), ys.data(), y.size() * 4), 0) << cpu::matmul_isa() << " kernel differs from the scalar twin";
    for (int i = 0; i < n; ++i) {
      std::vector<float> alone(static_cast<std::size_t>(rows));
      cpu::matmul(x.data() + i * cols, 1, p.w, alone.data(), pool);
      ASSERT_EQ(std::memcmp(alone.data(), y.data() + i * rows, alone.size() * 4), 0) << "row " << i << " of " << n;
    }
    // Odd row ranges (a thread's share) give the same bits.
    std::vector<float> split(y.size());
    for (int64_t r0 = 0; r0 < rows; r0 += 5) cpu::mlx_affine_int8_rows(a, p.w, split.data(), rows, r0, std::min<int64_t>(rows, r0 + 5));
    ASSERT_EQ(std::memcmp(split.data(), y.data(), y.size() * 4), 0);

    const std::vector<double> xh = rounded(x, cols);
    std::vector<double> def(y.size()), exact(y.size());
    for (int i = 0; i < n; ++i)
      for (int r = 0; r < rows; ++r) {
        def[static_cast<std::size_t>(i * rows + r)] = defined(p, r, x.data() + i * cols, xh.data() + i * cols);
        double e = 0;
        for (int c = 0; c < cols; ++c) e += static_cast<double>(x[i * cols + c]) * p.value(r, c);
        exact[static_cast<std::size_t>(i * rows + r)] = e;
      }
    EXPECT_LT(relative_l2(y, def), 1e-6) << "n " << n << " rows " << rows << " cols " << cols;
    // How far rounding x moves the product: a few thousandths for normal x and random weights.
    EXPECT_LT(relative_l2(y, exact), 1e-2) << "n " << n << " rows " << rows << " cols " << cols;
  }
}

TEST_P(Int8ActivationsMatmul, ANonFiniteActivationMakesItsRowsProductsNaN) {
  std::mt19937 rng(5);
  const auto [bits, gs] = GetParam();
  ThreadPool pool(2);
  Int8Scope int8;
  const AffineMatrix p = test::random_affine_matrix(bits, gs, 8, 256, rng);
  std::vector<float> x(2 * 256, 0.5f), y(2 * 8);
  x[256 + 40] = std::numeric_limits<float>::infinity();
  cpu::matmul(x.data(), 2, p.w, y.data(), pool);
  for (int r = 0; r < 8; ++r) {
    EXPECT_TRUE(std::isfinite(y[r])) << r;
    EXPECT_TRUE(std::isnan(y[8 + r])) << r;
  }
}

// Blocks of zeros and of values too small to scale (127 / amax not finite) round to zeros; the
// rows around them are unaffected, whatever came before them in the batch.
TEST_P(Int8ActivationsMatmul, ZeroAndTinyBlocksRoundToZeros) {
  std::mt19937 rng(9);
  const auto [bits, gs] = GetParam();
  ThreadPool pool(2);
  Int8Scope int8;
  const AffineMatrix p = test::random_affine_matrix(bits, gs, 8, 256, rng);
  std::normal_distribution<float> nd;
  std::vector<float> x(3 * 256), y(3 * 8), zeroed(3 * 8);
  for (auto& v : x) v = nd(rng);
  for (int c = 64; c < 96; ++c) {
    x[256 + c] = 1e-40f * static_cast<float>(c % 3);  // subnormal: 127 / amax overflows
    x[512 + c] = 0.0f;
  }
  cpu::matmul(x.data(), 3, p.w, y.data(), pool);
  for (int c = 64; c < 96; ++c) x[256 + c] = 0.0f;
  cpu::matmul(x.data(), 3, p.w, zeroed.data(), pool);
  for (int i = 0; i < 3 * 8; ++i) {
    ASSERT_TRUE(std::isfinite(y[i])) << i;
    EXPECT_NEAR(y[i], zeroed[i], 1e-6f * (1 + std::fabs(zeroed[i]))) << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Widths, Int8ActivationsMatmul,
                         ::testing::Values(Case{4, 32}, Case{4, 64}, Case{4, 128}, Case{8, 32}, Case{8, 64}, Case{8, 128}), [](const auto& info) {
                           char name[32];
                           std::snprintf(name, sizeof name, "b%d_g%d", info.param.bits, info.param.gs);
                           return std::string(name);
                         });

TEST(Int8Activations, OtherWidthsAndTheSwitchOffKeepTheExactProduct) {
  std::mt19937 rng(3);
  ThreadPool pool(2);
  std::normal_distribution<float> nd;
  for (auto [bits, on] : {std::pair{4, false}, {8, false}, {3, true}, {6, true}}) {
    const AffineMatrix p = test::random_affine_matrix(bits, 64, 12, 192, rng);
    std::vector<float> x(3 * 192), y(3 * 12), exact(y.size());
    for (auto& v : x) v = nd(rng);
    cpu::set_int8_activations(on);
    cpu::matmul(x.data(), 3, p.w, y.data(), pool);
    cpu::set_int8_activations(false);
    cpu::mlx_affine_rows_scalar(x.data(), 3, 192, p.w, exact.data(), 12, 0, 12);
    EXPECT_EQ(std::memcmp(y.data(), exact.data(), y.size() * 4), 0) << bits << " bits, switch " << on;
  }
}

}  // namespace
}  // namespace qwenrt
