#include "engine/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <random>

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

// Large vocabularies take the path that never sorts the vocabulary: its top-p nucleus must be
// the brute-force one (rank by logit, lower id first among equals; the shortest prefix reaching
// top_p), with min-p applied after it, and the draws must follow the renormalised weights.
std::vector<int32_t> brute_force_kept(const std::vector<float>& l, double t, double top_p, double min_p) {
  std::vector<int32_t> idx(l.size());
  for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<int32_t>(i);
  std::sort(idx.begin(), idx.end(), [&](int32_t a, int32_t b) { return l[a] > l[b] || (l[a] == l[b] && a < b); });
  const double mx = l[idx[0]];
  std::vector<double> w(idx.size());
  double z = 0;
  for (std::size_t i = 0; i < idx.size(); ++i) z += w[i] = std::exp((l[idx[i]] - mx) / t);
  std::size_t n = 0;
  double cum = 0;
  while (n < idx.size() && cum < top_p * z) cum += w[n++];
  std::vector<int32_t> kept;
  for (std::size_t i = 0; i < n; ++i)
    if (w[i] >= min_p) kept.push_back(idx[i]);
  return kept;
}

TEST(Sampler, LargeVocabularyNucleusIsTheBruteForceOne) {
  std::mt19937 rng(3);
  const std::size_t V = 20000;
  struct Case {
    const char* what;
    float t, top_p, min_p;
  };
  for (const Case c : {Case{"peaked, top-p", 0.7f, 0.9f, 0.0f}, Case{"peaked, top-p and min-p", 1.0f, 0.95f, 0.02f},
                       Case{"peaked, min-p only", 1.0f, 1.0f, 0.05f}, Case{"flat-ish, top-p", 2.0f, 0.5f, 0.0f}}) {
    // A few dominant logits over a long tail, as a language model's are.
    std::normal_distribution<float> tail(-4.0f, 2.0f);
    std::vector<float> l(V);
    for (auto& v : l) v = tail(rng);
    for (int i = 0; i < 30; ++i) l[rng() % V] = 6.0f + static_cast<float>(i % 7) * 0.5f;
    const auto kept = brute_force_kept(l, c.t, c.top_p, c.min_p);
    std::map<int32_t, double> expected;
    {
      double mx = *std::max_element(l.begin(), l.end()), z = 0;
      for (int32_t id : kept) z += expected[id] = std::exp((l[id] - mx) / c.t);
      for (auto& [id, q] : expected) q /= z;
    }
    SamplingParams p;
    p.seed = 9;
    p.temperature = c.t;
    p.top_p = c.top_p;
    p.min_p = c.min_p;
    Sampler s(p);
    std::map<int32_t, int> counts;
    const int draws = 4000;
    for (int i = 0; i < draws; ++i) ++counts[s.sample(l, {}, {}).id];
    for (const auto& [id, n] : counts) ASSERT_TRUE(expected.count(id)) << c.what << ": drew token " << id << " outside the nucleus";
    for (const auto& [id, q] : expected) {
      if (q < 0.05) continue;  // too rare to test its frequency with these draws
      const double f = static_cast<double>(counts[id]) / draws, se = std::sqrt(q * (1 - q) / draws);
      EXPECT_NEAR(f, q, 5 * se) << c.what << ": token " << id;
    }
  }
}

// Equal logits rank by id: top-p 0.5 over 1000 equal tokens keeps ids 0..499 (and draws them all).
TEST(Sampler, TiesAtTheNucleusEdgeGoToLowerIds) {
  const std::vector<float> flat(1000, 1.5f);
  SamplingParams p;
  p.seed = 4;
  p.top_p = 0.5f;
  Sampler s(p);
  std::vector<int> counts(flat.size(), 0);
  for (int i = 0; i < 5000; ++i) ++counts[static_cast<std::size_t>(s.sample(flat, {}, {}).id)];
  for (std::size_t id = 500; id < flat.size(); ++id) ASSERT_EQ(counts[id], 0) << "id " << id << " is past the nucleus";
  int seen = 0;
  for (std::size_t id = 0; id < 500; ++id) seen += counts[id] > 0;
  EXPECT_GT(seen, 490);  // 5000 draws over 500 ids leave 0.02 of them undrawn on average
}

// Reported logprobs over a real-sized vocabulary against log-softmax in double with std::exp.
TEST(Sampler, LogprobsOverALargeVocabularyMatchDouble) {
  std::mt19937 rng(8);
  std::normal_distribution<float> nd(0.0f, 3.0f);
  std::vector<float> l(248320);
  for (auto& v : l) v = nd(rng);
  l[1234] = -std::numeric_limits<float>::infinity();  // a masked token weighs nothing
  double mx = *std::max_element(l.begin(), l.end()), z = 0;
  for (float v : l) z += std::exp(static_cast<double>(v) - mx);
  const double log_z = mx + std::log(z);
  SamplingParams p;
  p.seed = 2;
  p.temperature = 0.8f;
  p.top_k = 50;
  p.logprobs = true;
  p.top_logprobs = 4;
  Sampler s(p);
  for (int i = 0; i < 5; ++i) {
    const auto r = s.sample(l, {}, {});
    EXPECT_NEAR(r.logprob, l[static_cast<std::size_t>(r.id)] - log_z, 2e-6);
    ASSERT_EQ(r.top.size(), 4u);
    for (const auto& [id, lp] : r.top) EXPECT_NEAR(lp, l[static_cast<std::size_t>(id)] - log_z, 2e-6);
    for (std::size_t j = 1; j < r.top.size(); ++j)
      EXPECT_GE(l[static_cast<std::size_t>(r.top[j - 1].first)], l[static_cast<std::size_t>(r.top[j].first)]);
  }
  SamplingParams quiet = p;
  quiet.logprobs = false;
  quiet.top_logprobs = 0;
  Sampler q(quiet);
  EXPECT_TRUE(std::isnan(q.sample(l, {}, {}).logprob)) << "not asked for, not computed";
}

TEST(Sampler, RejectsImpossibleParameters) {
  for (auto mutate : std::vector<void (*)(SamplingParams&)>{
           [](SamplingParams& p) { p.temperature = -1; }, [](SamplingParams& p) { p.top_p = 0; }, [](SamplingParams& p) { p.top_p = 1.5f; },
           [](SamplingParams& p) { p.min_p = 2; }, [](SamplingParams& p) { p.top_k = -3; }, [](SamplingParams& p) { p.repetition_penalty = 0; },
           [](SamplingParams& p) { p.presence_penalty = 9; }, [](SamplingParams& p) { p.top_logprobs = 99; }}) {
    SamplingParams p;
    mutate(p);
    EXPECT_THROW(Sampler{p}, Error);
  }
}

}  // namespace
}  // namespace qwenrt
