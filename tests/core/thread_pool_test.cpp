// ThreadPool::parallel_for: every index exactly once, ranges aligned to the grain, any thread
// count and size, errors carried back to the caller, and the pool usable again afterwards.
#include "core/thread_pool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace qwenrt {
namespace {

// Runs one loop and checks its ranges: disjoint, covering [0, n), starting at multiples of grain.
void check_cover(ThreadPool& pool, std::size_t n, std::size_t grain) {
  std::vector<std::atomic<int>> hits(n);
  std::mutex m;
  std::vector<std::pair<std::size_t, std::size_t>> ranges;
  pool.parallel_for(n, grain, [&](std::size_t b, std::size_t e) {
    {
      std::lock_guard lock(m);
      ranges.emplace_back(b, e);
    }
    for (std::size_t i = b; i < e; ++i) hits[i].fetch_add(1);
  });
  for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "index " << i << " of " << n << ", grain " << grain;
  for (auto [b, e] : ranges) {
    EXPECT_LT(b, e);
    EXPECT_LE(e, n);
    EXPECT_EQ(b % std::max<std::size_t>(grain, 1), 0u) << "range [" << b << ", " << e << ")";
  }
}

TEST(ThreadPool, EveryIndexOnceInGrainAlignedRanges) {
  for (int threads : {1, 2, 3, 8}) {
    ThreadPool pool(threads);
    for (std::size_t n : {0, 1, 2, 7, 8, 9, 63, 64, 65, 1000, 4097})
      for (std::size_t grain : {0, 1, 4, 16, 256}) check_cover(pool, n, grain);
  }
}

TEST(ThreadPool, ManyShortLoopsInARow) {
  // A decode step's pattern: hundreds of loops back to back, workers spinning between them.
  ThreadPool pool(4);
  std::atomic<long> sum{0};
  for (int loop = 0; loop < 500; ++loop)
    pool.parallel_for(64, 4, [&](std::size_t b, std::size_t e) {
      long s = 0;
      for (std::size_t i = b; i < e; ++i) s += static_cast<long>(i);
      sum.fetch_add(s);
    });
  EXPECT_EQ(sum.load(), 500L * (63 * 64 / 2));
}

TEST(ThreadPool, AnErrorReachesTheCallerAndThePoolGoesOn) {
  for (int threads : {1, 2, 4}) {
    ThreadPool pool(threads);
    for (std::size_t bad : {0, 17, 63}) {
      EXPECT_THROW(pool.parallel_for(64, 1,
                                     [&](std::size_t b, std::size_t e) {
                                       if (b <= bad && bad < e) throw std::runtime_error("range holding " + std::to_string(bad));
                                     }),
                   std::runtime_error);
      check_cover(pool, 100, 3);  // the next loop runs whole
    }
  }
}

TEST(ThreadPool, RefusesZeroThreads) { EXPECT_ANY_THROW(ThreadPool pool(0)); }

}  // namespace
}  // namespace qwenrt
