// engine/Scheduler's pools, prefix cache and choices on the demo model: admission waits for KV
// blocks; a request resumed from the prefix cache computes bitwise the same logits as on a fresh
// scheduler and prefills only what the cache did not hold; n choices share one prefill and each
// samples as a request of its own seed would; logprobs are the raw distribution's.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "core/thread_pool.h"
#include "engine/scheduler.h"
#include "server/demo_scheduler.h"

namespace qwenrt {
namespace {

using namespace test;

std::vector<int32_t> long_prompt(std::size_t tokens) { return test::long_prompt(session().tokenizer(), tokens); }

Scheduler make(const SchedulerOptions& opt) {
  return Scheduler(session().model(), session().tokenizer(), session().stop_ids(), opt, ThreadPool::global());
}

TEST(SchedulerPools, AdmissionWaitsForKvBlocks) {
  if (demo_model().empty()) GTEST_SKIP() << "no demo model";
  SchedulerOptions opt;
  opt.max_seqs = 2;
  opt.ctx_size = 192;
  opt.kv_blocks = 3;  // one context: two requests of 120 tokens cannot run together
  Scheduler s(session().model(), session().tokenizer(), session().stop_ids(), opt, ThreadPool::global());
  auto first = s.submit(greedy(long_prompt(20), 100));
  std::vector<GenerationEvent> events;
  first->wait(events, std::chrono::seconds(30));  // running
  auto second = s.submit(greedy(long_prompt(21), 100));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const SchedulerStats mid = s.stats();
  EXPECT_EQ(mid.running, 1);
  EXPECT_EQ(mid.waiting, 1);
  EXPECT_EQ(mid.kv_blocks, 3);
  const Result r1 = collect(*first), r2 = collect(*second);
  EXPECT_EQ(r1.finish.at(0).finish, FinishReason::Length);
  EXPECT_EQ(r2.finish.at(0).finish, FinishReason::Length);
  EXPECT_TRUE(s.wait_idle(std::chrono::seconds(5)));
  EXPECT_EQ(s.stats().kv_blocks_used, 0);
  // Two choices of 120 tokens need 2 + 2 blocks: more than the pool, refused at once.
  GenerationRequest two = greedy(long_prompt(20), 100);
  two.n = 2;
  try {
    s.submit(std::move(two));
    FAIL() << "accepted a request larger than the KV pool";
  } catch (const SubmitError& e) {
    EXPECT_EQ(e.kind, SubmitError::Kind::TooLong);
  }
}

TEST(SchedulerPools, ResumedFromThePrefixCacheBitwiseAsAFreshPrefill) {
  if (demo_model().empty()) GTEST_SKIP() << "no demo model";
  SchedulerOptions opt;
  opt.max_seqs = 2;
  opt.prefill_chunk = opt.window_budget = 128;
  opt.snapshot_interval = 128;
  opt.prefix_cache_bytes = 64 << 20;
  const std::vector<int32_t> prompt = long_prompt(700);
  auto traced = [&](std::vector<std::vector<float>>& rows) {
    GenerationRequest r = greedy(prompt, 16);
    r.on_logits = [&rows](int, std::span<const float> l) { rows.emplace_back(l.begin(), l.end()); };
    return r;
  };
  std::vector<std::vector<float>> resumed_rows, fresh_rows, uncached_rows;
  Result resumed, fresh, uncached;
  int64_t prefilled = 0;
  {
    Scheduler s = make(opt);
    const Result first = collect(*s.submit(greedy({prompt.begin(), prompt.begin() + 500}, 4)));
    EXPECT_EQ(first.finish.at(0).cached_tokens, 0);
    const int64_t before = s.stats().prefill_tokens;
    resumed = collect(*s.submit(traced(resumed_rows)));
    prefilled = s.stats().prefill_tokens - before;
    const SchedulerStats st = s.stats();
    EXPECT_EQ(st.prefix.hits, 1);
    EXPECT_EQ(st.prefix.misses, 1);
    EXPECT_GT(st.prefix.bytes, 0u);
  }
  {
    Scheduler s = make(opt);
    fresh = collect(*s.submit(traced(fresh_rows)));
  }
  {
    // Without the cache the prompt is not cut at snapshot points (640 here): the same bits still.
    SchedulerOptions off = opt;
    off.prefix_cache_bytes = 0;
    Scheduler s = make(off);
    uncached = collect(*s.submit(traced(uncached_rows)));
  }
  // The first request left snapshots at 128, 256, 384 and 448 (its last multiple of 64).
  EXPECT_EQ(resumed.finish.at(0).cached_tokens, 448);
  EXPECT_EQ(prefilled, 700 - 448);
  EXPECT_EQ(fresh.finish.at(0).cached_tokens, 0);
  EXPECT_EQ(resumed.text[0], fresh.text[0]);
  ASSERT_EQ(resumed_rows.size(), fresh_rows.size());
  ASSERT_EQ(uncached_rows.size(), fresh_rows.size());
  for (std::size_t t = 0; t < resumed_rows.size(); ++t) {
    ASSERT_EQ(0, std::memcmp(resumed_rows[t].data(), fresh_rows[t].data(), resumed_rows[t].size() * sizeof(float))) << "logits of token " << t;
    ASSERT_EQ(0, std::memcmp(uncached_rows[t].data(), fresh_rows[t].data(), fresh_rows[t].size() * sizeof(float))) << "logits of token " << t;
  }
}

TEST(SchedulerPools, ChoicesSharePrefillAndSampleAsTheirOwnSeeds) {
  if (demo_model().empty()) GTEST_SKIP() << "no demo model";
  SchedulerOptions opt;
  opt.max_seqs = 4;
  Scheduler s = make(opt);
  const std::vector<int32_t> prompt = long_prompt(40);
  auto sampled = [&](uint64_t seed, int n) {
    GenerationRequest r = greedy(prompt, 12);
    r.sampling.temperature = 1.0f;
    r.sampling.seed = seed;
    r.n = n;
    return r;
  };
  const int64_t before = s.stats().prefill_tokens;
  const Result three = collect(*s.submit(sampled(5, 3)));
  EXPECT_EQ(s.stats().prefill_tokens - before, 40);  // one prefill for three choices
  ASSERT_EQ(three.finish.size(), 3u);
  for (int c = 0; c < 3; ++c) {
    const Result one = collect(*s.submit(sampled(5 + static_cast<uint64_t>(c), 1)));
    EXPECT_EQ(three.text.at(c), one.text.at(0)) << "choice " << c;
    EXPECT_EQ(three.finish.at(c).completion_tokens, 12);
  }
  EXPECT_TRUE(s.wait_idle(std::chrono::seconds(5)));
  EXPECT_EQ(s.stats().kv_blocks_used, 0);
  EXPECT_EQ(s.stats().free_slots, 4);
}

// The prefix cache's blocks come out of the KV pool: a request that needs them gets them back.
TEST(SchedulerPools, AdmissionEvictsPrefixCacheBlocks) {
  if (demo_model().empty()) GTEST_SKIP() << "no demo model";
  SchedulerOptions opt;
  opt.max_seqs = 2;
  opt.ctx_size = 512;
  opt.kv_blocks = 8;  // one context
  opt.prefill_chunk = opt.window_budget = 128;
  opt.snapshot_interval = 128;
  opt.prefix_cache_bytes = 64 << 20;
  Scheduler s = make(opt);
  const std::vector<int32_t> a = long_prompt(400);
  collect(*s.submit(greedy(a, 4)));
  ASSERT_TRUE(s.wait_idle(std::chrono::seconds(5)));
  const SchedulerStats held = s.stats();
  EXPECT_EQ(held.prefix.entries, 3);  // 128, 256 and 384 (also the last multiple of 64 before token 400)
  EXPECT_EQ(held.kv_blocks_used, 6);  // the blocks of its first 384 tokens
  std::vector<int32_t> b = long_prompt(401);
  b.erase(b.begin());                                   // shares no prefix with a
  const Result r = collect(*s.submit(greedy(b, 100)));  // 500 tokens: all 8 blocks
  EXPECT_EQ(r.finish.at(0).finish, FinishReason::Length);
  EXPECT_EQ(r.finish.at(0).cached_tokens, 0);
  EXPECT_GT(s.stats().prefix.evictions, 0);
}

// Cancelling a request of n choices before its prompt is in ends every choice and frees everything.
TEST(SchedulerPools, CancelledChoicesAllFinish) {
  if (demo_model().empty()) GTEST_SKIP() << "no demo model";
  SchedulerOptions opt;
  opt.max_seqs = 4;
  opt.prefill_chunk = opt.window_budget = 64;  // a prefill of several iterations
  Scheduler s = make(opt);
  GenerationRequest r = greedy(long_prompt(600), 50);
  r.n = 3;
  auto h = s.submit(std::move(r));
  h->cancel();
  const Result out = collect(*h);
  ASSERT_EQ(out.finish.size(), 3u);
  for (const auto& [choice, e] : out.finish) EXPECT_EQ(e.finish, FinishReason::Cancelled) << "choice " << choice;
  EXPECT_TRUE(s.wait_idle(std::chrono::seconds(5)));
  EXPECT_EQ(s.stats().free_slots, 4);
  EXPECT_EQ(s.stats().kv_blocks_used, 0);
}

TEST(SchedulerPools, LogprobsAreTheRawDistributions) {
  if (demo_model().empty()) GTEST_SKIP() << "no demo model";
  Scheduler s = make({});
  std::vector<std::vector<float>> rows;
  GenerationRequest r = greedy(long_prompt(30), 8);
  r.sampling.logprobs = true;
  r.sampling.top_logprobs = 3;
  r.on_logits = [&rows](int, std::span<const float> l) { rows.emplace_back(l.begin(), l.end()); };
  const Result out = collect(*s.submit(std::move(r)));
  const auto& lps = out.logprobs.at(0);
  ASSERT_EQ(lps.size(), 8u);
  for (std::size_t t = 0; t < lps.size(); ++t) {
    // log softmax in double, independently.
    const auto& l = rows[t];
    double mx = -INFINITY, sum = 0;
    for (float v : l) mx = std::max(mx, static_cast<double>(v));
    for (float v : l) sum += std::exp(static_cast<double>(v) - mx);
    auto logprob = [&](int32_t id) { return static_cast<double>(l[static_cast<std::size_t>(id)]) - mx - std::log(sum); };
    ASSERT_EQ(lps[t].top.size(), 3u);
    EXPECT_EQ(lps[t].top[0].id, lps[t].id);  // greedy: the best
    EXPECT_NEAR(lps[t].logprob, logprob(lps[t].id), 1e-4);
    for (const auto& a : lps[t].top) {
      EXPECT_NEAR(a.logprob, logprob(a.id), 1e-4);
      EXPECT_EQ(a.bytes, session().tokenizer().token_bytes(a.id));
    }
    EXPECT_GE(lps[t].top[0].logprob, lps[t].top[1].logprob);
  }
}

}  // namespace
}  // namespace qwenrt
