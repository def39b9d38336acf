// engine/Scheduler on the GPU, with the demo model (released head sizes): what holds on the GPU is
// that decode steps of at most 8 rows are batch-invariant (the skinny products and the attention
// and DeltaNet decode kernels compute each row alone) and a prompt window computes one sequence's
// chunk the same way whatever else waits. With --max-seqs 8 and a window budget of one chunk (each
// window step carries one sequence), a greedy request's logits are bitwise the same alone and
// among 7 others, some of them sampling. With prompt windows of one 64-token chunk each, a request
// resumed from the prefix cache (DeltaNet snapshots copied to the host and back, KV blocks shared
// and copied on the device) computes bitwise a fresh run's logits, and n choices (forked on the
// device) sample as requests of their own seeds.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <functional>

#include "backend/cuda/gpu_test_support.h"
#include "core/thread_pool.h"
#include "engine/scheduler.h"
#include "engine/text_session.h"
#include "server/demo_scheduler.h"

namespace qwenrt {
namespace {

using namespace test;

TextSession& gpu_session() {
  static TextSession s(demo_model(), false, DeviceSpec{DeviceSpec::Kind::Cuda, 0});
  return s;
}

std::vector<int32_t> prompt_of(int i) {
  return gpu_session().tokenizer().encode("Prompt number " + std::to_string(i) + ": tell me something about the number " + std::to_string(i * 7) +
                                          ".");
}

TEST(SchedulerGpu, GreedyLogitsAloneAndAmongSevenOthers) {
  QWENRT_REQUIRE_GPU();
  if (demo_model().empty()) GTEST_SKIP() << "no demo model";
  TextSession& session = gpu_session();
  SchedulerOptions opt;
  opt.max_seqs = 8;
  opt.prefill_chunk = opt.window_budget = 16;  // prompts of several chunks; one sequence per window step
  const auto [alone, among, alone_rows, among_rows] = alone_and_among(session, opt, greedy(prompt_of(3), 40), 5, 8, [](int i) {
    GenerationRequest r = greedy(prompt_of(300 + i), 6 + 5 * i);
    if (i % 3 == 0) r.sampling.temperature = 0.8f, r.sampling.seed = static_cast<uint64_t>(i);
    return r;
  });
  EXPECT_EQ(alone.text.at(0), among.text.at(0));
  ASSERT_EQ(alone_rows.size(), 40u);
  ASSERT_EQ(among_rows.size(), 40u);
  for (std::size_t t = 0; t < alone_rows.size(); ++t)
    ASSERT_EQ(0, std::memcmp(alone_rows[t].data(), among_rows[t].data(), alone_rows[t].size() * sizeof(float))) << "logits of token " << t;
}

std::vector<int32_t> long_prompt(std::size_t tokens) { return test::long_prompt(gpu_session().tokenizer(), tokens); }

Scheduler make(const SchedulerOptions& opt) {
  TextSession& s = gpu_session();
  return Scheduler(s.model(), s.tokenizer(), s.stop_ids(), opt, ThreadPool::global());
}

TEST(SchedulerGpu, ResumedFromThePrefixCacheBitwiseAsAFreshPrefill) {
  QWENRT_REQUIRE_GPU();
  if (demo_model().empty()) GTEST_SKIP() << "no demo model";
  SchedulerOptions opt;
  opt.max_seqs = 2;
  opt.prefill_chunk = opt.window_budget = 64;  // every window one chunk, resumed or not
  opt.snapshot_interval = 64;
  opt.prefix_cache_bytes = 256 << 20;
  const std::vector<int32_t> prompt = long_prompt(700);
  auto traced = [&](std::vector<std::vector<float>>& rows) {
    GenerationRequest r = greedy(prompt, 16);
    r.on_logits = [&rows](int, std::span<const float> l) { rows.emplace_back(l.begin(), l.end()); };
    return r;
  };
  std::vector<std::vector<float>> resumed_rows, fresh_rows;
  Result resumed, fresh;
  {
    Scheduler s = make(opt);
    const Result first = collect(*s.submit(greedy({prompt.begin(), prompt.begin() + 500}, 4)));
    EXPECT_EQ(first.finish.at(0).cached_tokens, 0);
    const int64_t before = s.stats().prefill_tokens;
    resumed = collect(*s.submit(traced(resumed_rows)));
    EXPECT_EQ(s.stats().prefill_tokens - before, 700 - 448);
    EXPECT_EQ(s.stats().prefix.hits, 1);
  }
  {
    SchedulerOptions off = opt;
    off.prefix_cache_bytes = 0;
    Scheduler s = make(off);
    fresh = collect(*s.submit(traced(fresh_rows)));
  }
  EXPECT_EQ(resumed.finish.at(0).cached_tokens, 448);  // the first request's last snapshot
  EXPECT_EQ(resumed.text[0], fresh.text[0]);
  ASSERT_EQ(resumed_rows.size(), fresh_rows.size());
  for (std::size_t t = 0; t < resumed_rows.size(); ++t)
    ASSERT_EQ(0, std::memcmp(resumed_rows[t].data(), fresh_rows[t].data(), resumed_rows[t].size() * sizeof(float))) << "logits of token " << t;
}

TEST(SchedulerGpu, ChoicesForkOnTheDeviceAndSampleAsTheirOwnSeeds) {
  QWENRT_REQUIRE_GPU();
  if (demo_model().empty()) GTEST_SKIP() << "no demo model";
  SchedulerOptions opt;
  opt.max_seqs = 4;
  Scheduler s = make(opt);
  const std::vector<int32_t> prompt = long_prompt(70);  // a partly filled KV block, copied on write
  auto sampled = [&](uint64_t seed, int n) {
    GenerationRequest r = greedy(prompt, 12);
    r.sampling.temperature = 1.0f;
    r.sampling.seed = seed;
    r.n = n;
    return r;
  };
  const int64_t before = s.stats().prefill_tokens;
  const Result three = collect(*s.submit(sampled(5, 3)));
  EXPECT_EQ(s.stats().prefill_tokens - before, 70);
  ASSERT_EQ(three.finish.size(), 3u);
  for (int c = 0; c < 3; ++c) {
    const Result one = collect(*s.submit(sampled(5 + static_cast<uint64_t>(c), 1)));
    EXPECT_EQ(three.text.at(c), one.text.at(0)) << "choice " << c;
  }
  EXPECT_TRUE(s.wait_idle(std::chrono::seconds(5)));
  EXPECT_EQ(s.stats().free_slots, 4);
}

// Mixed steps on the GPU (serve's default there): the decode rows that ride in a prompt's window
// steps give logits within bf16 noise of separate decode steps (other kernels: the window's
// products, attention and chunked DeltaNet), the same greedy tokens up to a near tie, with the
// argmax picked on the device or the logits brought home alike.
TEST(SchedulerGpu, MixedStepsCarryDecodeRowsWithinBf16NoiseOfSeparateSteps) {
  QWENRT_REQUIRE_GPU();
  if (demo_model().empty()) GTEST_SKIP() << "no demo model";
  auto run = [](bool mixed, bool watch) { return run_beside_a_prefill(gpu_session(), prompt_of(21), mixed, watch); };
  const MixedRun apart = run(false, true), mixed = run(true, true), mixed_argmax = run(true, false);
  EXPECT_EQ(apart.mixed_steps, 0);
  EXPECT_GE(mixed.mixed_steps, 10);
  EXPECT_EQ(mixed.decoding.text.at(0), mixed_argmax.decoding.text.at(0));
  ASSERT_EQ(apart.rows.size(), 24u);
  ASSERT_EQ(mixed.rows.size(), 24u);
  for (std::size_t t = 0; t < apart.rows.size(); ++t) {
    const std::vector<float>& a = apart.rows[t];
    const auto top = [](const std::vector<float>& r) { return std::max_element(r.begin(), r.end()) - r.begin(); };
    EXPECT_LT(test::relative_l2(mixed.rows[t], std::vector<double>(a.begin(), a.end())), 1e-2) << "logits of token " << t;
    if (top(a) != top(mixed.rows[t])) {
      // Greedy paths part only at a near tie; after it the rows are of other contexts.
      std::vector<float> sorted = a;
      std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<>());
      EXPECT_LT(sorted[0] - sorted[1], 0.05f) << "token " << t << " differs without a near tie";
      return;
    }
  }
  EXPECT_EQ(apart.decoding.text.at(0), mixed.decoding.text.at(0));
  EXPECT_EQ(apart.prefilling.text.at(0), mixed.prefilling.text.at(0));
}

}  // namespace
}  // namespace qwenrt

namespace qwenrt {
namespace {

// serve --speculative mtp on the GPU: one sampled request's every logits row, bitwise, without
// speculation alone, and with it alone and among five others (verify windows of up to 8 sequences
// computed row by row as lone decode rows).
TEST(SchedulerGpu, SpeculationKeepsTheLogitsRowsAloneAndAmongOthers) {
  QWENRT_REQUIRE_GPU();
  if (demo_model().empty()) GTEST_SKIP() << "no demo model";
  const GenerationRequest traced = sampled_traced(prompt_of(7));
  auto other = [](int i) { return mixed_other(prompt_of(50 + i), i); };
  SchedulerOptions plain;
  plain.max_seqs = 8;
  plain.prefill_chunk = plain.window_budget = 16;  // one sequence per window step
  SchedulerOptions spec = plain;
  spec.speculative = true;
  spec.speculation.max_draft_tokens = 3;
  spec.speculation.adaptive = false;
  spec.speculate_max_seqs = 8;
  const auto p = alone_and_among(gpu_session(), plain, traced, 2, 6, other);
  const auto s = alone_and_among(gpu_session(), spec, traced, 2, 6, other);
  ASSERT_EQ(p.alone_rows.size(), 40u);
  for (const auto* rows : {&s.alone_rows, &s.among_rows}) {
    const char* which = rows == &s.alone_rows ? "alone" : "among others";
    ASSERT_EQ(rows->size(), p.alone_rows.size()) << which;
    for (std::size_t t = 0; t < rows->size(); ++t)
      ASSERT_EQ(0, std::memcmp(p.alone_rows[t].data(), (*rows)[t].data(), p.alone_rows[t].size() * sizeof(float)))
          << which << ", row " << t << " (rel_l2 " << test::relative_l2((*rows)[t], std::vector<double>(p.alone_rows[t].begin(), p.alone_rows[t].end()))
          << ")";
  }
  EXPECT_EQ(p.alone.text.at(0), s.among.text.at(0));
}

}  // namespace
}  // namespace qwenrt
