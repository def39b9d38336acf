#include "engine/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "core/error.h"

namespace qwenrt {
namespace {

const std::vector<float> kLogits = {2.0f, 1.0f, 0.5f, -1.0f, 0.0f};

std::vector<double> softmax(const std::vector<float>& l, double t) {
  std::vector<double> p(l.size());
  double z = 0;
  for (std::size_t i = 0; i < l.size(); ++i) z += p[i] = std::exp(l[i] / t);
  for (auto& v : p) v /= z;
  return p;
}

// Draws n samples and checks each frequency against `expected` within 5 standard errors.
void expect_distribution(const SamplingParams& params, const std::vector<double>& expected, int n = 40000) {
  Sampler s(params);
  std::vector<int> counts(expected.size(), 0);
  for (int i = 0; i < n; ++i) ++counts[static_cast<std::size_t>(s.sample(kLogits, {}, {}).id)];
  for (std::size_t t = 0; t < expected.size(); ++t) {
    const double f = static_cast<double>(counts[t]) / n, se = std::sqrt(std::max(expected[t] * (1 - expected[t]), 1e-12) / n);
    if (expected[t] == 0) EXPECT_EQ(counts[t], 0) << "token " << t << " must never be drawn";
    else EXPECT_NEAR(f, expected[t], 5 * se + 1e-9) << "token " << t;
  }
}

TEST(Sampler, TemperatureZeroIsArgmax) {
  SamplingParams p;
  p.temperature = 0;
  Sampler s(p);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(s.sample(kLogits, {}, {}).id, 0);
}

TEST(Sampler, PlainSamplingFollowsSoftmax) {
  SamplingParams p;
  p.seed = 11;
  expect_distribution(p, softmax(kLogits, 1.0));
  p.temperature = 0.5f;
  expect_distribution(p, softmax(kLogits, 0.5));
}

TEST(Sampler, TopKTopPMinPTruncateAndRenormalise) {
  auto p1 = softmax(kLogits, 1.0);  // order of tokens by prob: 0, 1, 2, 4, 3
  SamplingParams p;
  p.seed = 5;
  p.top_k = 2;
  expect_distribution(p, {p1[0] / (p1[0] + p1[1]), p1[1] / (p1[0] + p1[1]), 0, 0, 0});
  p.top_k = 0;
  p.top_p = static_cast<float>(p1[0] + 0.01);  // needs tokens 0 and 1 to reach it
  expect_distribution(p, {p1[0] / (p1[0] + p1[1]), p1[1] / (p1[0] + p1[1]), 0, 0, 0});
  p.top_p = 1.0f;
  p.min_p = static_cast<float>(p1[2] / p1[0] - 1e-4);  // keeps 0, 1, 2
  const double m = p1[0] + p1[1] + p1[2];
  expect_distribution(p, {p1[0] / m, p1[1] / m, p1[2] / m, 0, 0});
}

TEST(Sampler, SeededRunsReproduce) {
  SamplingParams p;
  p.seed = 42;
  p.temperature = 1.3f;
  Sampler a(p), b(p);
  for (int i = 0; i < 200; ++i) EXPECT_EQ(a.sample(kLogits, {}, {}).id, b.sample(kLogits, {}, {}).id);
}

TEST(Sampler, PenaltiesChangeLogitsAsSpecified) {
  SamplingParams p;
  p.temperature = 0;
  p.repetition_penalty = 4.0f;  // token 0: 2.0 → 0.5, now below token 1 (1.0)
  Sampler s(p);
  EXPECT_EQ(s.sample(kLogits, std::vector<int32_t>{0}, {}).id, 1);
  SamplingParams q;
  q.temperature = 0;
  q.presence_penalty = 0.6f;
  q.frequency_penalty = 0.3f;  // token 0 seen twice in output: 2.0 − 0.6 − 0.6 = 0.8 < 1.0
  Sampler s2(q);
  EXPECT_EQ(s2.sample(kLogits, {}, std::vector<int32_t>{0, 0}).id, 1);
  EXPECT_EQ(s2.sample(kLogits, std::vector<int32_t>{0, 0}, {}).id, 0) << "presence/frequency count the output only";
  // A negative logit is multiplied by the repetition penalty.
  SamplingParams r;
  r.temperature = 0;
  r.repetition_penalty = 2.0f;
  Sampler s3(r);
  const std::vector<float> neg = {-1.0f, -1.5f};
  EXPECT_EQ(s3.sample(neg, std::vector<int32_t>{0}, {}).id, 1);
}

TEST(Sampler, LogprobsAreRawLogSoftmax) {
  SamplingParams p;
  p.temperature = 0;
  p.top_logprobs = 3;
  p.repetition_penalty = 100.0f;  // must not affect reported logprobs
  Sampler s(p);
  auto r = s.sample(kLogits, std::vector<int32_t>{0}, {});
  auto ref = softmax(kLogits, 1.0);
  EXPECT_NEAR(r.logprob, std::log(ref[static_cast<std::size_t>(r.id)]), 1e-5);
  ASSERT_EQ(r.top.size(), 3u);
  EXPECT_EQ(r.top[0].first, 0);
  EXPECT_NEAR(r.top[0].second, std::log(ref[0]), 1e-5);
  EXPECT_EQ(r.top[1].first, 1);
  EXPECT_EQ(r.top[2].first, 2);
}

TEST(Sampler, RejectsImpossibleParameters) {
  for (auto mutate : std::vector<void (*)(SamplingParams&)>{
           [](SamplingParams& p) { p.temperature = -1; }, [](SamplingParams& p) { p.top_p = 0; },
           [](SamplingParams& p) { p.top_p = 1.5f; }, [](SamplingParams& p) { p.min_p = 2; },
           [](SamplingParams& p) { p.top_k = -3; }, [](SamplingParams& p) { p.repetition_penalty = 0; },
           [](SamplingParams& p) { p.presence_penalty = 9; }, [](SamplingParams& p) { p.top_logprobs = 99; }}) {
    SamplingParams p;
    mutate(p);
    EXPECT_THROW(Sampler{p}, Error);
  }
}

}  // namespace
}  // namespace qwenrt
