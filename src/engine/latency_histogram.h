#pragma once
// A Prometheus-style histogram of latencies in seconds: counts per upper bound (cumulative when
// rendered), their sum and count. Fixed buckets from 1 ms to 60 s.
#include <array>
#include <cstdint>

namespace qwenrt {

struct LatencyHistogram {
  static constexpr std::array<double, 14> kBounds = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 60.0};
  std::array<int64_t, kBounds.size() + 1> counts{};  // the last one: above every bound
  double sum = 0;
  int64_t count = 0;

  void add(double seconds) {
    std::size_t i = 0;
    while (i < kBounds.size() && seconds > kBounds[i]) ++i;
    ++counts[i];
    sum += seconds;
    ++count;
  }
};

}  // namespace qwenrt
