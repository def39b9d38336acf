#include "backend/cpu/matmul.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/half.h"

namespace qwenrt {
namespace {

struct Fixture {
  std::vector<uint8_t> storage;
  Weight w;
  std::vector<double> dense;  // the weight values as doubles
};

Fixture make_weight(DType dt, int64_t rows, int64_t cols, std::mt19937& rng) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  Fixture f;
  f.storage.resize(static_cast<std::size_t>(rows * cols) * dtype_size(dt));
  f.dense.resize(static_cast<std::size_t>(rows * cols));
  for (int64_t i = 0; i < rows * cols; ++i) {
    float v = nd(rng);
    if (dt == DType::F32) {
      std::memcpy(&f.storage[i * 4], &v, 4);
      f.dense[i] = v;
    } else if (dt == DType::BF16) {
      uint16_t h = f32_to_bf16(v);
      std::memcpy(&f.storage[i * 2], &h, 2);
      f.dense[i] = bf16_to_f32(h);
    } else {
      uint16_t h = f32_to_f16(v);
      std::memcpy(&f.storage[i * 2], &h, 2);
      f.dense[i] = f16_to_f32(h);
    }
  }
  f.w = {weight_format_of(dt), rows, cols, reinterpret_cast<const std::byte*>(f.storage.data())};
  return f;
}

class MatmulTest : public ::testing::TestWithParam<DType> {};

TEST_P(MatmulTest, MatchesDoubleReferenceOnOddShapes) {
  std::mt19937 rng(1);
  ThreadPool pool(2);
  for (auto [n, rows, cols] : {std::tuple{1, 7, 13}, {3, 33, 64}, {5, 9, 100}, {9, 130, 31}, {17, 5, 257}}) {
    Fixture f = make_weight(GetParam(), rows, cols, rng);
    std::vector<float> x(static_cast<std::size_t>(n * cols)), y(static_cast<std::size_t>(n * rows));
    std::normal_distribution<float> nd;
    for (auto& v : x) v = nd(rng);
    cpu::matmul(x.data(), n, f.w, y.data(), pool);
    double err = 0, ref_norm = 0;
    for (int i = 0; i < n; ++i)
      for (int r = 0; r < rows; ++r) {
        double ref = 0;
        for (int c = 0; c < cols; ++c) ref += static_cast<double>(x[i * cols + c]) * f.dense[r * cols + c];
        err += (y[i * rows + r] - ref) * (y[i * rows + r] - ref);
        ref_norm += ref * ref;
      }
    EXPECT_LT(std::sqrt(err / ref_norm), 1e-6) << n << "x" << rows << "x" << cols;
  }
}

// A row's result must not depend on the other rows in the batch, bit for bit.
TEST_P(MatmulTest, RowsAreBatchInvariant) {
  std::mt19937 rng(2);
  ThreadPool pool(2);
  const int64_t rows = 67, cols = 203, n = 11;
  Fixture f = make_weight(GetParam(), rows, cols, rng);
  std::vector<float> x(static_cast<std::size_t>(n * cols)), y(static_cast<std::size_t>(n * rows)), y1(static_cast<std::size_t>(rows));
  std::normal_distribution<float> nd;
  for (auto& v : x) v = nd(rng);
  cpu::matmul(x.data(), n, f.w, y.data(), pool);
  for (int64_t i = 0; i < n; ++i) {
    cpu::matmul(x.data() + i * cols, 1, f.w, y1.data(), pool);
    EXPECT_EQ(0, std::memcmp(y1.data(), y.data() + i * rows, rows * sizeof(float))) << "row " << i;
  }
}

TEST_P(MatmulTest, MultiOutputEqualsSeparateCalls) {
  std::mt19937 rng(3);
  ThreadPool pool(2);
  Fixture a = make_weight(GetParam(), 19, 40, rng), b = make_weight(GetParam(), 3, 40, rng);
  std::vector<float> x(2 * 40, 0.5f), ya(2 * 19), yb(2 * 3), y2a(2 * 19), y2b(2 * 3);
  const cpu::MatmulOutput outs[] = {{a.w, ya.data(), 19}, {b.w, yb.data(), 3}};
  cpu::matmul_multi(x.data(), 2, 40, outs, pool);
  cpu::matmul(x.data(), 2, a.w, y2a.data(), pool);
  cpu::matmul(x.data(), 2, b.w, y2b.data(), pool);
  EXPECT_EQ(ya, y2a);
  EXPECT_EQ(yb, y2b);
}

INSTANTIATE_TEST_SUITE_P(AllWeightTypes, MatmulTest, ::testing::Values(DType::BF16, DType::F16, DType::F32),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace qwenrt
