// Block-scaled FP8 products: the e4m3 decoding of every code against the format's definition, the
// AVX2 kernel against its scalar twin and against the dense kernel over the dequantized matrix (all
// bit for bit), batch invariance, row slices that start inside a block, and the double reference.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "backend/cpu/matmul.h"
#include "backend/cpu/matmul_formats.h"
#include "core/half.h"
#include "support/random_fp8_matrix.h"

namespace qwenrt {
namespace {

// e4m3fn by its definition: bias 7, 3 mantissa bits, exponent 0 subnormal (m/8 · 2^-6).
double e4m3_definition(uint8_t q) {
  const int sign = q >> 7, e = (q >> 3) & 0xF, m = q & 7;
  const double mag = e == 0 ? std::ldexp(m / 8.0, -6) : std::ldexp(1.0 + m / 8.0, e - 7);
  return sign ? -mag : mag;
}

TEST(Fp8E4m3, EveryCodeDecodesToItsValue) {
  for (int q = 0; q < 256; ++q) {
    if ((q & 0x7F) == 0x7F) continue;  // NaN codes
    ASSERT_EQ(static_cast<double>(fp8_e4m3_to_f32(static_cast<uint8_t>(q))), e4m3_definition(static_cast<uint8_t>(q))) << "code " << q;
  }
  EXPECT_EQ(fp8_e4m3_to_f32(0x7E), 448.0f);
  EXPECT_EQ(fp8_e4m3_to_f32(0xB8), -1.0f);
  EXPECT_EQ(fp8_e4m3_to_f32(0x01), std::ldexp(1.0f, -9));
}

using test::Fp8Matrix;

// The dequantized matrix as f32 rows (what the loader's tests compare with the fixtures).
std::vector<float> dequantized(const Weight& w) {
  std::vector<float> out(static_cast<std::size_t>(w.rows * w.cols));
  for (int64_t r = 0; r < w.rows; ++r) w.row_to_f32(r, out.data() + r * w.cols);
  return out;
}

struct Case {
  int64_t rows, cols;
  int br, bc;
  WeightFormat scale;
};

class Fp8BlockMatmul : public ::testing::TestWithParam<Case> {};

TEST_P(Fp8BlockMatmul, RowsAreCodeTimesTheirBlockScale) {
  std::mt19937 rng(3);
  const Case c = GetParam();
  Fp8Matrix m = test::random_fp8_matrix(c.rows, c.cols, c.br, c.bc, c.scale, rng);
  const auto deq = dequantized(m.w);
  for (int64_t r = 0; r < c.rows; ++r)
    for (int64_t col = 0; col < c.cols; ++col) {
      const float s = m.w.fp8_scale(r, col / c.bc);
      ASSERT_EQ(deq[static_cast<std::size_t>(r * c.cols + col)],
                static_cast<float>(e4m3_definition(m.q[static_cast<std::size_t>(r * c.cols + col)])) * s)
          << r << "," << col;
    }
  // A slice starting inside a block row keeps the scales of the rows it came from.
  const int64_t begin = c.rows / 3 + 1;
  const Weight s = m.w.row_slice(begin, c.rows - begin);
  std::vector<float> row(static_cast<std::size_t>(c.cols));
  for (int64_t r = 0; r < s.rows; ++r) {
    s.row_to_f32(r, row.data());
    ASSERT_EQ(std::memcmp(row.data(), deq.data() + (begin + r) * c.cols, row.size() * 4), 0) << "slice row " << r;
  }
}

TEST_P(Fp8BlockMatmul, Avx2EqualsScalarAndDenseBitForBitBatchInvariant) {
  std::mt19937 rng(5);
  const Case c = GetParam();
  ThreadPool pool(2);
  Fp8Matrix m = test::random_fp8_matrix(c.rows, c.cols, c.br, c.bc, c.scale, rng);
  const auto deq = dequantized(m.w);
  const Weight dense{WeightFormat::F32, c.rows, c.cols, reinterpret_cast<const std::byte*>(deq.data())};
  const int64_t begin = c.rows / 3 + 1;
  for (int64_t n : {1, 3, 6}) {
    std::vector<float> x(static_cast<std::size_t>(n * c.cols)), y(static_cast<std::size_t>(n * c.rows)), ys(y.size()), yd(y.size());
    std::normal_distribution<float> nd;
    for (auto& v : x) v = nd(rng);
    cpu::matmul(x.data(), n, m.w, y.data(), pool);
    cpu::fp8_block_rows_scalar(x.data(), n, c.cols, m.w, ys.data(), c.rows, 0, c.rows);
    cpu::matmul(x.data(), n, dense, yd.data(), pool);
    ASSERT_EQ(std::memcmp(y.data(), ys.data(), y.size() * 4), 0) << cpu::matmul_isa() << " kernel differs from the scalar twin, n=" << n;
    ASSERT_EQ(std::memcmp(y.data(), yd.data(), y.size() * 4), 0) << "FP8 product differs from the dense product of its rows, n=" << n;
    for (int64_t i = 0; i < n; ++i) {
      std::vector<float> alone(static_cast<std::size_t>(c.rows));
      cpu::matmul(x.data() + i * c.cols, 1, m.w, alone.data(), pool);
      ASSERT_EQ(std::memcmp(alone.data(), y.data() + i * c.rows, alone.size() * 4), 0) << "row " << i << " of " << n;
    }
    // The slice's product is the matching rows of the whole product.
    const Weight s = m.w.row_slice(begin, c.rows - begin);
    std::vector<float> ysl(static_cast<std::size_t>(n * s.rows));
    cpu::matmul(x.data(), n, s, ysl.data(), pool);
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(std::memcmp(ysl.data() + i * s.rows, y.data() + i * c.rows + begin, static_cast<std::size_t>(s.rows) * 4), 0);
    double err = 0, norm = 0;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t r = 0; r < c.rows; ++r) {
        double ref = 0;
        for (int64_t col = 0; col < c.cols; ++col) ref += static_cast<double>(x[i * c.cols + col]) * deq[r * c.cols + col];
        err += (y[i * c.rows + r] - ref) * (y[i * c.rows + r] - ref);
        norm += ref * ref;
      }
    EXPECT_LT(std::sqrt(err / norm), 1e-6);
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, Fp8BlockMatmul,
                         ::testing::Values(Case{300, 384, 128, 128, WeightFormat::BF16},  // partial row block
                                           Case{70, 203, 128, 128, WeightFormat::BF16},   // one block, a tail of 3 columns
                                           Case{45, 200, 16, 24, WeightFormat::F32},      // many small blocks, f32 scales
                                           Case{33, 136, 8, 64, WeightFormat::F16}),
                         [](const auto& info) {
                           const Case& c = info.param;
                           return std::to_string(c.rows) + "x" + std::to_string(c.cols) + "_b" + std::to_string(c.br) + "x" + std::to_string(c.bc) +
                                  "_" + std::string(weight_format_name(c.scale));
                         });

}  // namespace
}  // namespace qwenrt
