#include "backend/cpu/vector_ops.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

namespace qwenrt {
namespace {

// Rows of different lengths (tails of 0..7 past a multiple of 8, blocks of 64 and not), counts
// not a multiple of 4, rows read at an offset.
struct Data {
  std::vector<std::vector<float>> rows;
  std::vector<const float*> ptrs;
  std::vector<float> a, w;
};

Data make(int64_t count, int64_t n, int64_t offset, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd;
  Data d;
  for (int64_t r = 0; r < count; ++r) {
    d.rows.emplace_back(static_cast<std::size_t>(offset + n));
    for (auto& x : d.rows.back()) x = nd(rng);
  }
  for (auto& row : d.rows) d.ptrs.push_back(row.data());
  d.a.resize(static_cast<std::size_t>(n));
  for (auto& x : d.a) x = nd(rng);
  d.w.resize(static_cast<std::size_t>(count));
  for (auto& x : d.w) x = nd(rng);
  return d;
}

TEST(VectorOps, DotRowsAreDotAndTheScalarTwinsBits) {
  for (int64_t n : {1, 7, 8, 13, 64, 128, 256, 259})
    for (int64_t count : {1, 3, 4, 9}) {
      const int64_t offset = 5;
      const Data d = make(count, n, offset, static_cast<unsigned>(n * 31 + count));
      std::vector<float> got(static_cast<std::size_t>(count)), twin(got.size());
      cpu::dot_rows(d.a.data(), d.ptrs.data(), offset, count, n, got.data());
      cpu::dot_rows_scalar(d.a.data(), d.ptrs.data(), offset, count, n, twin.data());
      for (int64_t r = 0; r < count; ++r) {
        EXPECT_EQ(got[r], twin[r]) << "n " << n << " row " << r;
        EXPECT_EQ(got[r], cpu::dot(d.a.data(), d.ptrs[r] + offset, n)) << "n " << n << " row " << r;
        double ref = 0;
        for (int64_t i = 0; i < n; ++i) ref += static_cast<double>(d.a[i]) * d.rows[r][offset + i];
        EXPECT_NEAR(got[r], ref, 1e-5 * (1 + std::abs(ref))) << "n " << n << " row " << r;
      }
    }
}

TEST(VectorOps, WeightedRowsAreOneFmaARowInOrder) {
  for (int64_t n : {1, 7, 8, 13, 64, 72, 128, 256, 259})
    for (int64_t count : {1, 3, 4, 9}) {
      const int64_t offset = 3;
      const Data d = make(count, n, offset, static_cast<unsigned>(n * 17 + count));
      std::vector<float> got(static_cast<std::size_t>(n), 99.0f), twin(got.size(), -7.0f), chain(got.size(), 0.0f);
      cpu::weighted_rows(d.w.data(), d.ptrs.data(), offset, count, n, got.data());
      cpu::weighted_rows_scalar(d.w.data(), d.ptrs.data(), offset, count, n, twin.data());
      for (int64_t r = 0; r < count; ++r)
        for (int64_t i = 0; i < n; ++i) chain[i] = std::fma(d.w[r], d.rows[r][offset + i], chain[i]);
      EXPECT_EQ(0, std::memcmp(got.data(), twin.data(), got.size() * sizeof(float))) << "n " << n << " count " << count;
      EXPECT_EQ(0, std::memcmp(got.data(), chain.data(), got.size() * sizeof(float))) << "n " << n << " count " << count;
    }
}

}  // namespace
}  // namespace qwenrt
