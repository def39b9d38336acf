// The blocked prompt-window kernels against the one-row (decode) path, bit for bit per (row,
// output): every dense format, every MLX affine width and FP8 with each scale format, 1..70 rows, k and output counts that
// are not multiples of the register tiles, blocks or 8, partial output ranges as threads take
// them, and the AVX2 kernel against its scalar twin.
#include "backend/cpu/matmul_blocked.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "backend/cpu/matmul.h"
#include "backend/cpu/matmul_formats.h"
#include "core/half.h"
#include "support/random_fp8_matrix.h"

namespace qwenrt {
namespace {

struct Matrix {
  std::vector<uint8_t> data;
  std::vector<uint16_t> scales, biases;
  Weight w;
};

Matrix dense(WeightFormat f, int64_t rows, int64_t cols, std::mt19937& rng) {
  std::normal_distribution<float> nd;
  Matrix m;
  const std::size_t elem = f == WeightFormat::F32 ? 4 : 2;
  m.data.resize(static_cast<std::size_t>(rows * cols) * elem);
  for (std::size_t i = 0; i < static_cast<std::size_t>(rows * cols); ++i) {
    const float v = nd(rng);
    const uint16_t h = f == WeightFormat::BF16 ? f32_to_bf16(v) : f32_to_f16(v);
    if (f == WeightFormat::F32) std::memcpy(&m.data[i * 4], &v, 4);
    else std::memcpy(&m.data[i * 2], &h, 2);
  }
  m.w = {f, rows, cols, reinterpret_cast<const std::byte*>(m.data.data())};
  return m;
}

Matrix affine(int bits, int gs, WeightFormat scale_format, int64_t rows, int64_t cols, std::mt19937& rng) {
  Matrix m;
  m.data.resize(static_cast<std::size_t>(rows * cols * bits / 8) + 8);
  std::uniform_int_distribution<int> byte(0, 255);
  for (auto& b : m.data) b = static_cast<uint8_t>(byte(rng));
  std::normal_distribution<float> nd(0.0f, 0.05f);
  for (int64_t i = 0; i < rows * cols / gs; ++i) {
    const float s = nd(rng), b = nd(rng) * 8;
    m.scales.push_back(scale_format == WeightFormat::F16 ? f32_to_f16(s) : f32_to_bf16(s));
    m.biases.push_back(scale_format == WeightFormat::F16 ? f32_to_f16(b) : f32_to_bf16(b));
  }
  m.w = {WeightFormat::MlxAffine, rows, cols, reinterpret_cast<const std::byte*>(m.data.data())};
  m.w.quant = {bits, gs, scale_format, reinterpret_cast<const std::byte*>(m.scales.data()), reinterpret_cast<const std::byte*>(m.biases.data())};
  return m;
}

// For every n in 1..70: the blocked kernel over rows [0, n) and over a partial output range, and
// its scalar twin, each bitwise equal to the one-row kernel applied to that row alone.
void expect_blocked_equals_rows(const Weight& w, cpu::RowKernel row, cpu::RowKernel blocked, cpu::RowKernel blocked_scalar, std::mt19937& rng) {
  const int64_t k = w.cols, m = w.rows, max_n = 70;
  std::normal_distribution<float> nd;
  std::vector<float> x(static_cast<std::size_t>(max_n * k));
  for (auto& v : x) v = nd(rng);
  std::vector<float> ref(static_cast<std::size_t>(max_n * m));
  for (int64_t i = 0; i < max_n; ++i) row(x.data() + i * k, 1, k, w, ref.data() + i * m, m, 0, m);
  const int64_t lo = m / 3 + 1, hi = m - m / 4;  // a thread's slice, not aligned to the tiles
  for (int64_t n = 1; n <= max_n; ++n) {
    std::vector<float> y(static_cast<std::size_t>(n * m), -1.0f), ys(y.size(), -1.0f), yp(y.size(), -1.0f);
    blocked(x.data(), n, k, w, y.data(), m, 0, m);
    blocked_scalar(x.data(), n, k, w, ys.data(), m, 0, m);
    blocked(x.data(), n, k, w, yp.data(), m, lo, hi);
    ASSERT_EQ(0, std::memcmp(y.data(), ref.data(), y.size() * 4)) << n << " rows: blocked (" << cpu::matmul_isa() << ") != one-row kernel";
    ASSERT_EQ(0, std::memcmp(ys.data(), ref.data(), ys.size() * 4)) << n << " rows: blocked scalar twin != one-row kernel";
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(0, std::memcmp(yp.data() + i * m + lo, ref.data() + i * m + lo, static_cast<std::size_t>(hi - lo) * 4))
          << n << " rows, partial range";
  }
}

class BlockedDense : public ::testing::TestWithParam<WeightFormat> {};

TEST_P(BlockedDense, BitwiseEqualToOneRowKernel) {
  std::mt19937 rng(21);
  // k: below one k-block with a tail, several k-blocks with a tail; outputs: past one weight block.
  for (auto [rows, cols] : {std::pair{53, 300}, std::pair{7, 13}, std::pair{50, 128}, std::pair{4, 5}}) {
    Matrix m = dense(GetParam(), rows, cols, rng);
    SCOPED_TRACE(std::to_string(rows) + "x" + std::to_string(cols));
    expect_blocked_equals_rows(m.w, cpu::dense_rows, cpu::dense_rows_blocked, cpu::dense_rows_blocked_scalar, rng);
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, BlockedDense, ::testing::Values(WeightFormat::BF16, WeightFormat::F16, WeightFormat::F32),
                         [](const auto& info) { return std::string(weight_format_name(info.param)); });

struct AffineCase {
  int bits, gs;
  WeightFormat scales;
};

class BlockedAffine : public ::testing::TestWithParam<AffineCase> {};

TEST_P(BlockedAffine, BitwiseEqualToOneRowKernel) {
  std::mt19937 rng(22);
  const auto [bits, gs, scales] = GetParam();
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{53, 3 * 128 + gs}, std::pair<int64_t, int64_t>{5, gs}}) {
    Matrix m = affine(bits, gs, scales, rows, cols, rng);
    SCOPED_TRACE(std::to_string(rows) + "x" + std::to_string(cols));
    expect_blocked_equals_rows(m.w, cpu::mlx_affine_rows, cpu::mlx_affine_rows_blocked, cpu::mlx_affine_rows_blocked_scalar, rng);
  }
}

INSTANTIATE_TEST_SUITE_P(Widths, BlockedAffine,
                         ::testing::Values(AffineCase{2, 64, WeightFormat::BF16}, AffineCase{3, 32, WeightFormat::BF16},
                                           AffineCase{4, 64, WeightFormat::BF16}, AffineCase{4, 128, WeightFormat::F16},
                                           AffineCase{4, 32, WeightFormat::BF16}, AffineCase{5, 32, WeightFormat::BF16},
                                           AffineCase{6, 128, WeightFormat::BF16}, AffineCase{8, 32, WeightFormat::F16}),
                         [](const auto& info) { return "b" + std::to_string(info.param.bits) + "_g" + std::to_string(info.param.gs); });

struct Fp8Case {
  int br, bc;
  WeightFormat scales;
};

class BlockedFp8 : public ::testing::TestWithParam<Fp8Case> {};

TEST_P(BlockedFp8, BitwiseEqualToOneRowKernel) {
  std::mt19937 rng(24);
  const auto [br, bc, scales] = GetParam();
  // k past a k-block with a tail of fewer than 8 columns; one short row with k under 8; a view
  // starting inside a tile of rows.
  for (auto [rows, cols, offset] : {std::tuple<int64_t, int64_t, int64_t>{53, 2 * 128 + bc + 5, 0}, std::tuple<int64_t, int64_t, int64_t>{5, 7, 0},
                                    std::tuple<int64_t, int64_t, int64_t>{50, 3 * 128, br / 2 + 1}}) {
    test::Fp8Matrix m = test::random_fp8_matrix(rows, cols, br, bc, scales, rng, offset);
    SCOPED_TRACE(std::to_string(rows) + "x" + std::to_string(cols) + " from row " + std::to_string(offset));
    expect_blocked_equals_rows(m.w, cpu::fp8_block_rows, cpu::fp8_block_rows_blocked, cpu::fp8_block_rows_blocked_scalar, rng);
  }
}

INSTANTIATE_TEST_SUITE_P(Blocks, BlockedFp8,
                         ::testing::Values(Fp8Case{128, 128, WeightFormat::BF16}, Fp8Case{128, 128, WeightFormat::F32},
                                           Fp8Case{16, 64, WeightFormat::F16}, Fp8Case{3, 8, WeightFormat::BF16}),
                         [](const auto& info) {
                           return "b" + std::to_string(info.param.br) + "x" + std::to_string(info.param.bc) + "_" +
                                  std::string(weight_format_name(info.param.scales));
                         });

// Through the dispatcher and the thread pool: a window of any size gives each row the bits of a
// one-row decode step.
TEST(BlockedDispatch, WindowRowsEqualDecodeSteps) {
  std::mt19937 rng(23);
  ThreadPool pool(2);
  Matrix d = dense(WeightFormat::BF16, 301, 200, rng);
  Matrix a = affine(4, 64, WeightFormat::BF16, 301, 256, rng);
  test::Fp8Matrix f = test::random_fp8_matrix(301, 260, 128, 128, WeightFormat::BF16, rng);
  for (const Weight* w : {&d.w, &a.w, &f.w}) {
    const int64_t k = w->cols, m = w->rows;
    for (int64_t n : {cpu::kBlockedMinRows - 1, cpu::kBlockedMinRows, int64_t{67}}) {
      std::vector<float> x(static_cast<std::size_t>(n * k)), y(static_cast<std::size_t>(n * m)), y1(static_cast<std::size_t>(m));
      std::normal_distribution<float> nd;
      for (auto& v : x) v = nd(rng);
      cpu::matmul(x.data(), n, *w, y.data(), pool);
      for (int64_t i = 0; i < n; ++i) {
        cpu::matmul(x.data() + i * k, 1, *w, y1.data(), pool);
        ASSERT_EQ(0, std::memcmp(y1.data(), y.data() + i * m, static_cast<std::size_t>(m) * 4)) << "row " << i << " of " << n;
      }
    }
  }
}

}  // namespace
}  // namespace qwenrt
