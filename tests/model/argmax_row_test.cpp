// argmax_row (greedy picks on the host) against the plain definition: the first of equal maxima,
// NaN counting as −∞, on random rows of every length around its lane width, with ties, NaNs, ±∞
// and signed zeros.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "model/qwen35_model.h"

namespace qwenrt {
namespace {

int32_t reference_argmax(const std::vector<float>& x) {
  auto key = [](float v) { return std::isnan(v) ? -std::numeric_limits<float>::infinity() : v; };
  std::size_t best = 0;
  for (std::size_t i = 1; i < x.size(); ++i)
    if (key(x[i]) > key(x[best])) best = i;
  return static_cast<int32_t>(best);
}

TEST(ArgmaxRow, MatchesTheDefinition) {
  std::mt19937 rng(3);
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const std::vector<float> specials = {nan, inf, -inf, 0.0f, -0.0f, 1.0f, 1.0f};
  for (int n : {1, 2, 15, 16, 17, 31, 33, 100, 1000, 4099}) {
    for (int trial = 0; trial < 50; ++trial) {
      std::vector<float> x(static_cast<std::size_t>(n));
      std::uniform_int_distribution<int> small(-3, 3);  // few distinct values: many ties
      for (float& v : x) v = static_cast<float>(small(rng));
      const int sprinkle = trial % 5;
      for (int s = 0; s < sprinkle; ++s)
        x[std::uniform_int_distribution<std::size_t>(0, x.size() - 1)(rng)] = specials[static_cast<std::size_t>(rng() % specials.size())];
      if (trial == 7) std::fill(x.begin(), x.end(), nan);
      if (trial == 8) std::fill(x.begin(), x.end(), -inf), x.back() = nan;
      ASSERT_EQ(argmax_row(x.data(), n), reference_argmax(x)) << "n " << n << " trial " << trial;
    }
  }
}

}  // namespace
}  // namespace qwenrt
