// engine/Scheduler on the demo model: batch invariance on the CPU (a greedy sequence's logits and
// tokens are bitwise the same alone or among 15 others), cancellation frees slots, the context and
// queue limits.
#include "engine/scheduler.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstring>

#include "core/thread_pool.h"
#include "engine/text_session.h"
#include "server/demo_scheduler.h"

namespace qwenrt {
namespace {

using namespace test;

std::vector<int32_t> prompt_of(int i) {
  return session().tokenizer().encode("Prompt number " + std::to_string(i) + ": tell me something about the number " + std::to_string(i * 7) + ".");
}

TEST(Scheduler, DecodeLogitsDoNotDependOnTheBatch) {
  if (demo_model().empty()) GTEST_SKIP() << "no demo model";
  // The model level: one sequence's decode row alone and as row 5 of 16.
  const Qwen35Model& model = session().model();
  ThreadPool& pool = ThreadPool::global();
  const std::size_t V = static_cast<std::size_t>(model.config().vocab_size);
  auto run = [&](int rows) {
    ModelCache cache = model.new_cache(rows);
    Step window{Phase::Window, {}, false};
    for (int i = 0; i < rows; ++i) window.sequences.push_back({cache.acquire(), i == 5 || rows == 1 ? prompt_of(5) : prompt_of(100 + i), {}, {}});
    model.forward(window, cache, pool);
    Step decode{Phase::Decode, {}, false};
    for (int i = 0; i < rows; ++i) decode.sequences.push_back({i, {static_cast<int32_t>(42 + i * (rows > 1 && i != 5))}, {}, {}});
    const std::vector<float> logits = model.forward(decode, cache, pool);
    const std::size_t row = rows == 1 ? 0 : 5;
    return std::vector<float>(logits.begin() + static_cast<long>(row * V), logits.begin() + static_cast<long>((row + 1) * V));
  };
  const auto alone = run(1), among = run(16);
  ASSERT_EQ(alone.size(), among.size());
  EXPECT_EQ(0, std::memcmp(alone.data(), among.data(), alone.size() * sizeof(float))) << "decode logits differ alone and among 16";
}

// Every logits row request 7 samples from, bitwise, alone and among 15 others (some sampling, all
// of other lengths, prompts sharing window steps).
TEST(Scheduler, GreedyTokensAndLogitsAloneAndAmongFifteenOthers) {
  if (demo_model().empty()) GTEST_SKIP() << "no demo model";
  SchedulerOptions opt;
  opt.max_seqs = 16;
  opt.prefill_chunk = opt.window_budget = 16;  // prompts of several chunks, sharing window steps
  const auto [alone, among, alone_rows, among_rows] = alone_and_among(session(), opt, greedy(prompt_of(3), 48), 7, 16, [](int i) {
    GenerationRequest r = greedy(prompt_of(200 + i), 8 + 3 * i);
    if (i % 3 == 0) r.sampling.temperature = 0.8f, r.sampling.seed = static_cast<uint64_t>(i);
    return r;
  });
  EXPECT_EQ(alone.text.at(0), among.text.at(0));
  EXPECT_EQ(alone.finish.at(0).completion_tokens, 48);
  EXPECT_EQ(among.finish.at(0).finish, FinishReason::Length);
  ASSERT_EQ(alone_rows.size(), 48u);
  ASSERT_EQ(among_rows.size(), 48u);
  for (std::size_t t = 0; t < alone_rows.size(); ++t)
    ASSERT_EQ(0, std::memcmp(alone_rows[t].data(), among_rows[t].data(), alone_rows[t].size() * sizeof(float))) << "logits of token " << t;
}

// Decode steps whose rows are all plain greedy take the model's own argmax picks (on a GPU the
// logits never leave it); the tokens are those the sampler picks from the whole logits row: alone
// (argmax steps), watched through on_logits (logits steps) and beside a sampled request (logits
// steps for both).
TEST(Scheduler, ArgmaxStepsPickWhatTheSamplerPicks) {
  if (demo_model().empty()) GTEST_SKIP() << "no demo model";
  SchedulerOptions opt;
  opt.max_seqs = 4;
  Scheduler s(session().model(), session().tokenizer(), session().stop_ids(), opt, ThreadPool::global());
  const GenerationRequest plain = greedy(prompt_of(11), 40);
  const Result fast = collect(*s.submit(plain));
  GenerationRequest watched = plain;
  int rows = 0;
  watched.on_logits = [&rows](int, std::span<const float>) { ++rows; };
  const Result slow = collect(*s.submit(watched));
  EXPECT_EQ(rows, 40);
  GenerationRequest sampled = greedy(prompt_of(12), 40);
  sampled.sampling.temperature = 0.7f;
  auto beside = s.submit(sampled);
  const Result mixed = collect(*s.submit(plain));
  collect(*beside);
  EXPECT_EQ(fast.finish.at(0).completion_tokens, 40);
  EXPECT_FALSE(fast.text.at(0).empty());
  EXPECT_EQ(fast.text.at(0), slow.text.at(0));
  EXPECT_EQ(fast.text.at(0), mixed.text.at(0));
}

// Mixed steps: while a long prompt prefills, the decoding sequences' rows ride in its window steps.
// Their tokens are those of separate decode steps, their logits within rounding (a one-row window
// runs the chunked DeltaNet form, not the recurrent one), whether their argmax or their logits come
// home; the prompt's own answer is unchanged too.
TEST(Scheduler, MixedStepsCarryDecodeRowsWithinRoundingOfSeparateSteps) {
  if (demo_model().empty()) GTEST_SKIP() << "no demo model";
  auto run = [](bool mixed, bool watch) { return run_beside_a_prefill(session(), prompt_of(21), mixed, watch); };
  const MixedRun apart = run(false, true), mixed = run(true, true), mixed_argmax = run(true, false);
  EXPECT_EQ(apart.mixed_steps, 0);
  EXPECT_GE(mixed.mixed_steps, 10);
  EXPECT_GE(mixed_argmax.mixed_steps, 10);
  EXPECT_EQ(apart.decoding.finish.at(0).completion_tokens, 24);
  EXPECT_EQ(apart.decoding.text.at(0), mixed.decoding.text.at(0));
  EXPECT_EQ(apart.decoding.text.at(0), mixed_argmax.decoding.text.at(0));
  EXPECT_EQ(apart.prefilling.text.at(0), mixed.prefilling.text.at(0));
  EXPECT_EQ(apart.prefilling.text.at(0), mixed_argmax.prefilling.text.at(0));
  ASSERT_EQ(apart.rows.size(), 24u);
  ASSERT_EQ(mixed.rows.size(), 24u);
  for (std::size_t t = 0; t < apart.rows.size(); ++t) {
    double diff = 0, norm = 0;
    for (std::size_t v = 0; v < apart.rows[t].size(); ++v) {
      const double d = static_cast<double>(apart.rows[t][v]) - mixed.rows[t][v];
      diff += d * d;
      norm += static_cast<double>(apart.rows[t][v]) * apart.rows[t][v];
    }
    EXPECT_LT(std::sqrt(diff / norm), 1e-5) << "logits of token " << t;
  }
}

// A step that throws fails each of its sequences with the message, and the scheduler goes on.
TEST(Scheduler, AFailedStepFailsItsSequencesAndServingGoesOn) {
  if (demo_model().empty()) GTEST_SKIP() << "no demo model";
  SchedulerOptions opt;
  opt.max_seqs = 4;
  std::atomic<int> decode_steps{0};
  std::atomic<bool> armed{true};
  opt.before_step = [&](const Step& step) {
    if (step.phase == Phase::Decode && ++decode_steps == 3 && armed) throw std::runtime_error("injected failure");
  };
  Scheduler s(session().model(), session().tokenizer(), session().stop_ids(), opt, ThreadPool::global());
  std::vector<std::shared_ptr<RequestHandle>> handles;
  for (int i = 0; i < 3; ++i) handles.push_back(s.submit(greedy(prompt_of(i), 20)));
  for (auto& h : handles) {
    const Result r = collect(*h);
    EXPECT_EQ(r.finish.at(0).finish, FinishReason::Error);
    EXPECT_EQ(r.finish.at(0).error, "injected failure");
  }
  armed = false;
  const Result after = collect(*s.submit(greedy(prompt_of(5), 6)));
  EXPECT_EQ(after.finish.at(0).finish, FinishReason::Length);
  EXPECT_TRUE(s.wait_idle(std::chrono::seconds(5)));
  const SchedulerStats st = s.stats();
  EXPECT_EQ(st.failed_steps, 1);
  EXPECT_EQ(st.free_slots, 4);
  EXPECT_EQ(st.kv_blocks_used, 0);
  EXPECT_EQ(st.finished[static_cast<std::size_t>(FinishReason::Error)], 3);
}

TEST(Scheduler, CancelFreesTheSlot) {
  if (demo_model().empty()) GTEST_SKIP() << "no demo model";
  SchedulerOptions opt;
  opt.max_seqs = 1;
  opt.max_queue = 4;
  Scheduler s(session().model(), session().tokenizer(), session().stop_ids(), opt, ThreadPool::global());
  auto first = s.submit(greedy(prompt_of(1), 4000));
  std::vector<GenerationEvent> events;
  first->wait(events, std::chrono::seconds(10));  // running
  auto second = s.submit(greedy(prompt_of(2), 5));
  first->cancel();
  const Result r1 = collect(*first), r2 = collect(*second);
  EXPECT_EQ(r1.finish.at(0).finish, FinishReason::Cancelled);
  EXPECT_EQ(r2.finish.at(0).finish, FinishReason::Length);
  EXPECT_TRUE(s.wait_idle(std::chrono::seconds(5)));
  EXPECT_EQ(s.stats().free_slots, 1);
}

TEST(Scheduler, RefusesWhatCannotRun) {
  if (demo_model().empty()) GTEST_SKIP() << "no demo model";
  SchedulerOptions opt;
  opt.max_seqs = 1;
  opt.max_queue = 1;
  opt.ctx_size = 64;
  Scheduler s(session().model(), session().tokenizer(), session().stop_ids(), opt, ThreadPool::global());
  try {
    s.submit(greedy(prompt_of(1), 60));
    FAIL() << "accepted a request longer than the context";
  } catch (const SubmitError& e) {
    EXPECT_EQ(e.kind, SubmitError::Kind::TooLong);
  }
  try {
    s.submit(greedy({-1}, 1));
    FAIL();
  } catch (const SubmitError& e) {
    EXPECT_EQ(e.kind, SubmitError::Kind::Invalid);
  }
  // One runs, one waits, the next is refused.
  std::vector<std::shared_ptr<RequestHandle>> accepted;
  int refused = 0;
  for (int i = 0; i < 4; ++i) {
    try {
      accepted.push_back(s.submit(greedy(prompt_of(1), 40)));
    } catch (const SubmitError& e) {
      EXPECT_EQ(e.kind, SubmitError::Kind::QueueFull);
      ++refused;
    }
  }
  EXPECT_GE(refused, 1);
  EXPECT_LE(accepted.size(), 3u);
  for (auto& h : accepted) h->cancel();
  for (auto& h : accepted) collect(*h);
}

TEST(Scheduler, StopStringsEndTheText) {
  if (demo_model().empty()) GTEST_SKIP() << "no demo model";
  Scheduler s(session().model(), session().tokenizer(), session().stop_ids(), {}, ThreadPool::global());
  const Result full = collect(*s.submit(greedy(prompt_of(4), 30)));
  ASSERT_GE(full.text.at(0).size(), 6u);
  GenerationRequest r = greedy(prompt_of(4), 30);
  const std::string stop = full.text.at(0).substr(full.text.at(0).size() / 2, 3);
  r.output.stop_strings = {stop};
  const Result cut = collect(*s.submit(std::move(r)));
  EXPECT_EQ(cut.finish.at(0).finish, FinishReason::StopString);
  EXPECT_EQ(cut.text.at(0), full.text.at(0).substr(0, full.text.at(0).find(stop)));
}

}  // namespace
}  // namespace qwenrt

namespace qwenrt {
namespace {

TEST(TextOutput, CutsToolCallsAsTheyClose) {
  if (demo_model().empty()) GTEST_SKIP() << "no demo model";
  const text::Tokenizer& tok = session().tokenizer();
  const std::string text =
      "thinking</think>\n\nLet me check.\n<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
      "<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>\nmore <tool_call>broken";
  TextOutputOptions opt;
  opt.starts_in_reasoning = true;
  opt.tool_calls = true;
  opt.tools = nlohmann::ordered_json::parse(
      R"([{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"days": {"type": "integer"}}}}}])");
  TextOutput out(tok, opt);
  OutputDelta all;
  int call_at = -1, pushes = 0;
  for (int32_t id : tok.encode(text)) {
    OutputDelta d = out.push(id);
    if (!d.tool_calls.empty() && call_at < 0) call_at = pushes;
    all.append(std::move(d));
    ++pushes;
  }
  all.append(out.finish());
  EXPECT_EQ(all.reasoning, "thinking");
  ASSERT_EQ(all.tool_calls.size(), 1u);
  EXPECT_LT(call_at, pushes - 1);  // streamed when it closed, not at the end
  EXPECT_EQ(all.tool_calls[0].name, "get_weather");
  EXPECT_EQ(all.tool_calls[0].arguments, nlohmann::ordered_json::parse(R"({"city": "Paris", "days": 3})"));
  EXPECT_EQ(all.content, "Let me check.\n\nmore <tool_call>broken");
  EXPECT_EQ(out.tool_call_count(), 1);
}

}  // namespace
}  // namespace qwenrt
