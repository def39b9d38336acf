// engine/Scheduler with MTP speculation (serve --speculative mtp) on the demo model: every request's
// tokens, logprobs and sampled logits rows are bitwise those of the scheduler without speculation,
// greedy and seeded sampled, alone and several at once; stop strings, max_tokens, n > 1, the prefix
// cache and cancellation behave as without it; the draft counters move.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>

#include "core/error.h"
#include "core/thread_pool.h"
#include "engine/scheduler.h"
#include "server/demo_scheduler.h"
#include "support/fixtures.h"

namespace qwenrt {
namespace {

using namespace test;

std::vector<int32_t> prompt_of(int i) {
  return session().tokenizer().encode("Story " + std::to_string(i) + ": once upon a time there was a little robot who liked the number " +
                                      std::to_string(i * 13) + ".");
}

SchedulerOptions speculative(int max_draft_tokens, bool adaptive, int max_seqs = 8) {
  SchedulerOptions opt;
  opt.max_seqs = max_seqs;
  opt.speculative = true;
  opt.speculation.max_draft_tokens = max_draft_tokens;
  opt.speculation.adaptive = adaptive;
  opt.speculate_max_seqs = max_seqs;
  return opt;
}

// Requests of every kind: greedy, sampled with seeds, logprobs, penalties, n = 2, a short max_tokens.
std::vector<GenerationRequest> mixed_requests() {
  std::vector<GenerationRequest> rs;
  for (int i = 0; i < 6; ++i) {
    GenerationRequest r = greedy(prompt_of(i), 12 + 9 * i);
    if (i % 2 == 1) r.sampling.temperature = 0.8f, r.sampling.top_p = 0.95f, r.sampling.seed = 100 + static_cast<uint64_t>(i);
    if (i == 2) r.sampling.logprobs = true, r.sampling.top_logprobs = 3;
    if (i == 3) r.sampling.repetition_penalty = 1.3f, r.sampling.logprobs = true;
    if (i == 4) r.max_tokens = 2;
    if (i == 5) r.n = 2;
    rs.push_back(std::move(r));
  }
  return rs;
}

void expect_same(const Result& plain, const Result& spec, const std::string& what) {
  ASSERT_EQ(plain.finish.size(), spec.finish.size()) << what;
  for (const auto& [choice, f] : plain.finish) {
    const GenerationEvent& g = spec.finish.at(choice);
    EXPECT_EQ(plain.text.at(choice), spec.text.at(choice)) << what << " choice " << choice;
    EXPECT_EQ(f.finish, g.finish) << what << " choice " << choice;
    EXPECT_EQ(f.completion_tokens, g.completion_tokens) << what << " choice " << choice;
    EXPECT_EQ(f.prompt_tokens, g.prompt_tokens) << what;
    const auto& a = plain.logprobs.at(choice);
    const auto& b = spec.logprobs.at(choice);
    ASSERT_EQ(a.size(), b.size()) << what << " choice " << choice;
    for (std::size_t t = 0; t < a.size(); ++t) {
      EXPECT_EQ(a[t].id, b[t].id) << what << " token " << t;
      EXPECT_EQ(0, std::memcmp(&a[t].logprob, &b[t].logprob, sizeof(float))) << what << " logprob of token " << t;
      ASSERT_EQ(a[t].top.size(), b[t].top.size());
      for (std::size_t j = 0; j < a[t].top.size(); ++j) {
        EXPECT_EQ(a[t].top[j].id, b[t].top[j].id);
        EXPECT_EQ(0, std::memcmp(&a[t].top[j].logprob, &b[t].top[j].logprob, sizeof(float)));
      }
    }
  }
}

std::vector<Result> run_all(const SchedulerOptions& opt, const std::vector<GenerationRequest>& requests, SchedulerStats* stats = nullptr) {
  Scheduler s(session().model(), session().tokenizer(), session().stop_ids(), opt, ThreadPool::global());
  std::vector<std::shared_ptr<RequestHandle>> handles;
  for (const auto& r : requests) handles.push_back(s.submit(r));
  std::vector<Result> out;
  for (auto& h : handles) out.push_back(collect(*h));
  EXPECT_TRUE(s.wait_idle(std::chrono::seconds(10)));
  if (stats) *stats = s.stats();
  return out;
}

// Runs `requests` on a scheduler that never drafts (max_seqs slots) and checks `spec` gave each the
// same answer; returns the plain results.
std::vector<Result> expect_same_as_plain(const std::vector<GenerationRequest>& requests, const std::vector<Result>& spec, int max_seqs) {
  SchedulerOptions plain_opt;
  plain_opt.max_seqs = max_seqs;
  const auto plain = run_all(plain_opt, requests);
  for (std::size_t i = 0; i < requests.size(); ++i) expect_same(plain[i], spec[i], "request " + std::to_string(i));
  return plain;
}

// Six requests at once (seven sequences: one asks n = 2), with fixed and adaptive draft lengths:
// the same tokens and logprobs as the scheduler that never drafts, and drafts were accepted.
TEST(SchedulerSpeculation, ConcurrentRequestsGiveThePlainTokens) {
  if (demo_model().empty()) GTEST_SKIP() << "no demo model";
  SchedulerOptions plain_opt;
  plain_opt.max_seqs = 8;
  const auto requests = mixed_requests();
  const auto plain = run_all(plain_opt, requests);
  for (const auto& [k, adaptive] : {std::pair{3, false}, std::pair{1, false}, std::pair{4, true}}) {
    SchedulerStats st;
    const auto spec = run_all(speculative(k, adaptive), requests, &st);
    for (std::size_t i = 0; i < requests.size(); ++i)
      expect_same(plain[i], spec[i], "request " + std::to_string(i) + " k " + std::to_string(k) + (adaptive ? " adaptive" : ""));
    EXPECT_GT(st.spec_drafted, 0);
    EXPECT_GT(st.spec_accepted, 0);
    EXPECT_LE(st.spec_accepted, st.spec_drafted);
    EXPECT_GT(st.spec_rounds, 0);
    EXPECT_EQ(st.kv_blocks_used, 0);
    EXPECT_EQ(st.free_slots, 8);
  }
}

// One request's every sampled logits row, bitwise, with and without speculation, alone and among
// five others (the scheduler drafts for all of them).
TEST(SchedulerSpeculation, LogitsRowsAloneAndAmongOthers) {
  if (demo_model().empty()) GTEST_SKIP() << "no demo model";
  const GenerationRequest traced = sampled_traced(prompt_of(7));
  auto other = [](int i) { return mixed_other(prompt_of(50 + i), i); };
  SchedulerOptions plain_opt;
  plain_opt.max_seqs = 8;
  const auto plain = alone_and_among(session(), plain_opt, traced, 2, 6, other);
  const auto spec = alone_and_among(session(), speculative(3, false), traced, 2, 6, other);
  ASSERT_EQ(plain.alone_rows.size(), 40u);
  for (const auto* rows : {&plain.among_rows, &spec.alone_rows, &spec.among_rows}) {
    ASSERT_EQ(rows->size(), plain.alone_rows.size());
    for (std::size_t t = 0; t < rows->size(); ++t)
      ASSERT_EQ(0, std::memcmp(plain.alone_rows[t].data(), (*rows)[t].data(), plain.alone_rows[t].size() * sizeof(float))) << "row " << t;
  }
  EXPECT_EQ(plain.alone.text.at(0), spec.alone.text.at(0));
  EXPECT_EQ(plain.alone.text.at(0), spec.among.text.at(0));
}

// A stop string or a stop id inside an accepted window ends the text exactly where plain decoding
// ends it; the accepted drafts past it are never emitted.
TEST(SchedulerSpeculation, StopStringsAndStopIdsCutAcceptedWindows) {
  if (demo_model().empty()) GTEST_SKIP() << "no demo model";
  SchedulerOptions plain_opt;
  plain_opt.max_seqs = 4;
  const Result full = run_all(plain_opt, {greedy(prompt_of(4), 40)})[0];
  const std::string& text = full.text.at(0);
  ASSERT_GE(text.size(), 12u);
  std::vector<GenerationRequest> requests;
  for (std::size_t at : {text.size() / 3, text.size() / 2, text.size() * 3 / 4}) {
    GenerationRequest r = greedy(prompt_of(4), 40);
    r.output.stop_strings = {text.substr(at, 3)};
    requests.push_back(std::move(r));
  }
  GenerationRequest by_id = greedy(prompt_of(4), 40);
  by_id.sampling.logprobs = true;
  requests.push_back(by_id);
  const int32_t stop_id = run_all(plain_opt, {by_id})[0].logprobs.at(0).at(17).id;
  by_id.stop_ids = {stop_id};
  requests.push_back(by_id);
  const auto plain = run_all(plain_opt, requests);
  const auto spec = run_all(speculative(4, false, 4), requests);
  for (std::size_t i = 0; i < requests.size(); ++i) expect_same(plain[i], spec[i], "request " + std::to_string(i));
  EXPECT_EQ(spec[0].finish.at(0).finish, FinishReason::StopString);
  EXPECT_EQ(spec[4].finish.at(0).finish, FinishReason::Stop);
  EXPECT_LE(spec[4].finish.at(0).completion_tokens, 18);
}

// Above speculate_max_seqs the steps are plain decode steps (no step verifies drafts of more
// sequences than that); the tokens are the same either way.
TEST(SchedulerSpeculation, NoDraftsAboveTheThreshold) {
  if (demo_model().empty()) GTEST_SKIP() << "no demo model";
  SchedulerOptions opt = speculative(3, false, 4);
  opt.speculate_max_seqs = 1;
  std::atomic<std::size_t> most_verified{0}, most_decoded{0};
  opt.before_step = [&](const Step& step) {
    auto& most = step.phase == Phase::Committed ? most_verified : most_decoded;
    if (step.phase != Phase::Window && step.sequences.size() > most) most = step.sequences.size();
  };
  std::vector<GenerationRequest> requests;
  for (int i = 0; i < 3; ++i) requests.push_back(greedy(prompt_of(30 + i), 24));
  SchedulerStats st;
  const auto spec = run_all(opt, requests, &st);
  const auto plain = expect_same_as_plain(requests, spec, 4);
  EXPECT_LE(most_verified.load(), 1u);
  EXPECT_GE(most_decoded.load(), 2u);  // steps of several sequences ran, without drafts
  // Alone, the same scheduler drafts.
  const auto alone = run_all(opt, {requests[0]}, &st);
  expect_same(plain[0], alone[0], "alone");
  EXPECT_GT(st.spec_drafted, 0);
  EXPECT_GE(most_verified.load(), 1u);
}

// A sequence that waits above the threshold for longer than the MTP rows it keeps (256) has its
// MTP block start over from its last row; when it decodes alone again it drafts from there (a wrong
// restart position would fail the MTP cache's cut-back and end the request with an error).
TEST(SchedulerSpeculation, LongWaitAboveTheThresholdThenDraftsAgain) {
  if (demo_model().empty()) GTEST_SKIP() << "no demo model";
  SchedulerOptions opt = speculative(3, false, 2);
  opt.speculate_max_seqs = 1;
  const std::vector<GenerationRequest> requests{greedy(prompt_of(40), 300), greedy(prompt_of(41), 270)};
  SchedulerStats st;
  const auto spec = run_all(opt, requests, &st);
  expect_same_as_plain(requests, spec, 2);
  EXPECT_EQ(spec[0].finish.at(0).finish, FinishReason::Length);
  EXPECT_GT(st.spec_accepted, 0);
}

// With the prefix cache, a request resuming from a cached prefix drafts from the rows it computes
// (its MTP block starts past the cached part) and still gives the plain tokens.
TEST(SchedulerSpeculation, PrefixCacheResumeGivesThePlainTokens) {
  if (demo_model().empty()) GTEST_SKIP() << "no demo model";
  SchedulerOptions opt = speculative(3, false, 2);
  opt.prefill_chunk = opt.window_budget = 16;
  opt.prefix_cache_bytes = std::size_t{64} << 20;
  opt.snapshot_interval = 16;
  SchedulerOptions plain_opt = opt;
  plain_opt.speculative = false;
  std::vector<int32_t> prompt = prompt_of(9);
  const auto more = prompt_of(10);
  prompt.insert(prompt.end(), more.begin(), more.end());
  ASSERT_GT(prompt.size(), 40u);
  const GenerationRequest r = greedy(prompt, 30);
  Scheduler s(session().model(), session().tokenizer(), session().stop_ids(), opt, ThreadPool::global());
  const Result first = collect(*s.submit(r));
  const Result second = collect(*s.submit(r));
  EXPECT_GT(second.finish.at(0).cached_tokens, 0);
  const auto plain = run_all(plain_opt, {r});
  expect_same(plain[0], first, "first");
  expect_same(plain[0], second, "resumed");
  EXPECT_GT(s.stats().spec_accepted, 0);
}

// A request cancelled while it drafts ends as cancelled with a prefix of the plain text; its slots
// come back and the next request gives the plain tokens.
TEST(SchedulerSpeculation, CancelMidDraftFreesEverything) {
  if (demo_model().empty()) GTEST_SKIP() << "no demo model";
  SchedulerOptions plain_opt;
  plain_opt.max_seqs = 2;
  const auto plain = run_all(plain_opt, {greedy(prompt_of(1), 200), greedy(prompt_of(2), 20)});
  Scheduler s(session().model(), session().tokenizer(), session().stop_ids(), speculative(3, false, 2), ThreadPool::global());
  auto first = s.submit(greedy(prompt_of(1), 4000));
  std::vector<GenerationEvent> events;
  std::string seen;
  while (seen.size() < 20 && first->wait(events, std::chrono::seconds(10))) {
    for (const auto& e : events) seen += e.delta.content;
    events.clear();
  }
  first->cancel();
  Result r1 = collect(*first);
  r1.text[0] = seen + r1.text[0];
  EXPECT_EQ(r1.finish.at(0).finish, FinishReason::Cancelled);
  EXPECT_EQ(plain[0].text.at(0).substr(0, r1.text.at(0).size()), r1.text.at(0));
  const Result r2 = collect(*s.submit(greedy(prompt_of(2), 20)));
  expect_same(plain[1], r2, "after the cancel");
  EXPECT_TRUE(s.wait_idle(std::chrono::seconds(5)));
  const SchedulerStats st = s.stats();
  EXPECT_EQ(st.free_slots, 2);
  EXPECT_EQ(st.kv_blocks_used, 0);
  EXPECT_EQ(st.running, 0);
  EXPECT_GT(st.spec_drafted, 0);
}

// A verify step that throws fails its sequences; the next request gives the plain tokens and every
// slot and block comes back.
TEST(SchedulerSpeculation, AFailedVerifyStepFailsItsSequencesAndServingGoesOn) {
  if (demo_model().empty()) GTEST_SKIP() << "no demo model";
  SchedulerOptions opt = speculative(3, false, 4);
  std::atomic<int> verify_steps{0};
  std::atomic<bool> armed{true};
  opt.before_step = [&](const Step& step) {
    if (step.phase == Phase::Committed && ++verify_steps == 3 && armed) throw std::runtime_error("injected failure");
  };
  Scheduler s(session().model(), session().tokenizer(), session().stop_ids(), opt, ThreadPool::global());
  std::vector<std::shared_ptr<RequestHandle>> handles;
  for (int i = 0; i < 2; ++i) handles.push_back(s.submit(greedy(prompt_of(60 + i), 30)));
  int failed = 0;
  for (auto& h : handles) failed += collect(*h).finish.at(0).finish == FinishReason::Error;
  EXPECT_GE(failed, 1);
  armed = false;
  const Result after = collect(*s.submit(greedy(prompt_of(62), 20)));
  SchedulerOptions plain_opt;
  plain_opt.max_seqs = 4;
  expect_same(run_all(plain_opt, {greedy(prompt_of(62), 20)})[0], after, "after the failure");
  EXPECT_TRUE(s.wait_idle(std::chrono::seconds(5)));
  const SchedulerStats st = s.stats();
  EXPECT_EQ(st.failed_steps, 1);
  EXPECT_EQ(st.free_slots, 4);
  EXPECT_EQ(st.kv_blocks_used, 0);
}

TEST(SchedulerSpeculation, RefusesACheckpointWithoutMtp) {
  if (demo_model().empty()) GTEST_SKIP() << "no demo model";
  const Qwen35Model model = Qwen35Model::load(test::fixtures_dir() / "dense_tied");
  ASSERT_FALSE(model.has_mtp());
  SchedulerOptions opt;
  opt.speculative = true;
  try {
    Scheduler s(model, session().tokenizer(), {}, opt, ThreadPool::global());
    FAIL() << "a scheduler speculated without an MTP block";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no MTP block"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace qwenrt
