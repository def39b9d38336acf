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

// M queries against `count` keys read at an offset.
TEST(VectorOps, DotQueriesAreDotAndTheScalarTwinsBits) {
  for (int64_t n : {1, 7, 8, 13, 64, 128, 256, 259})
    for (int64_t M : {1, 3, 4, 9}) {
      const int64_t count = 6, offset = 5, ld = count + 2;
      const Data keys = make(count, n, offset, static_cast<unsigned>(n * 31 + M));
      const Data qs = make(M, n, 0, static_cast<unsigned>(n * 37 + M));
      std::vector<float> got(static_cast<std::size_t>(M * ld), 7.0f), twin(got.size(), 7.0f);
      cpu::dot_queries(qs.ptrs.data(), M, keys.ptrs.data(), offset, count, n, got.data(), ld);
      cpu::dot_queries_scalar(qs.ptrs.data(), M, keys.ptrs.data(), offset, count, n, twin.data(), ld);
      EXPECT_EQ(0, std::memcmp(got.data(), twin.data(), got.size() * sizeof(float))) << "n " << n << " M " << M;
      for (int64_t m = 0; m < M; ++m)
        for (int64_t j = 0; j < count; ++j) {
          EXPECT_EQ(got[m * ld + j], cpu::dot(qs.ptrs[m], keys.ptrs[j] + offset, n)) << "n " << n << " query " << m << " key " << j;
          double ref = 0;
          for (int64_t i = 0; i < n; ++i) ref += static_cast<double>(qs.rows[m][i]) * keys.rows[j][offset + i];
          EXPECT_NEAR(got[m * ld + j], ref, 1e-5 * (1 + std::abs(ref)));
        }
    }
}

// Queries with different row counts (causal ends), each one fma a row in order from 0.
TEST(VectorOps, WeightedRowsAreOneFmaARowInOrder) {
  for (int64_t n : {1, 7, 8, 13, 16, 64, 72, 256, 259})
    for (int64_t M : {1, 3, 4, 9}) {
      const int64_t rows = 11, offset = 3, ld = rows + 1;
      const Data d = make(rows, n, offset, static_cast<unsigned>(n * 17 + M));
      std::mt19937 rng(static_cast<unsigned>(n + M));
      std::normal_distribution<float> nd;
      std::vector<float> w(static_cast<std::size_t>(M * ld));
      for (auto& x : w) x = nd(rng);
      std::vector<int64_t> counts;
      for (int64_t m = 0; m < M; ++m) counts.push_back(rows - (m * 5) % 4);  // 11, 10, 9, 8, ...
      std::vector<std::vector<float>> got(M, std::vector<float>(n, 99.0f)), twin(M, std::vector<float>(n, -7.0f));
      std::vector<float*> got_p, twin_p;
      for (int64_t m = 0; m < M; ++m) got_p.push_back(got[m].data()), twin_p.push_back(twin[m].data());
      cpu::weighted_rows(w.data(), ld, counts.data(), M, d.ptrs.data(), offset, n, got_p.data());
      cpu::weighted_rows_scalar(w.data(), ld, counts.data(), M, d.ptrs.data(), offset, n, twin_p.data());
      for (int64_t m = 0; m < M; ++m) {
        std::vector<float> chain(static_cast<std::size_t>(n), 0.0f);
        for (int64_t j = 0; j < counts[m]; ++j)
          for (int64_t i = 0; i < n; ++i) chain[i] = std::fma(w[m * ld + j], d.rows[j][offset + i], chain[i]);
        EXPECT_EQ(0, std::memcmp(got[m].data(), twin[m].data(), n * sizeof(float))) << "n " << n << " query " << m;
        EXPECT_EQ(0, std::memcmp(got[m].data(), chain.data(), n * sizeof(float))) << "n " << n << " query " << m;
      }
    }
}

}  // namespace
}  // namespace qwenrt
