// The model against the float64 transformers oracle, and the invariances the engine promises:
// prefill windows and batching do not change a sequence's logits.
#include <gtest/gtest.h>

#include <algorithm>

#include "core/error.h"
#include "engine/greedy_generation.h"
#include "engine/sampled_generation.h"
#include "engine/step_queue.h"
#include "formats/npy.h"
#include "model/qwen35_model.h"
#include "support/batched_decode.h"
#include "support/fixtures.h"
#include "support/queued_steps.h"

namespace qwenrt {
namespace {

using test::relative_l2;

constexpr double kTolerance = 1e-5;

// Logits of every position, fed one token per decode step.
std::vector<float> token_by_token(const Qwen35Model& model, const std::vector<int32_t>& tokens, ThreadPool& pool) {
  ModelCache cache(model.config().cache_shape(), 1);
  const int slot = cache.acquire();
  std::vector<float> all;
  for (int32_t t : tokens) {
    auto l = model.forward({Phase::Decode, {{slot, {t}}}, false}, cache, pool);
    all.insert(all.end(), l.begin(), l.end());
  }
  return all;
}

class Parity : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    dir_ = test::fixtures_dir() / GetParam();
    ref_ = test::load_reference(GetParam());
  }
  std::filesystem::path dir_;
  test::Reference ref_;
  ThreadPool pool_{2};
};

TEST_P(Parity, LogitsMatchFloat64Reference) {
  const auto model = Qwen35Model::load(dir_);
  const auto expected = read_npy(dir_ / "logits.npy");
  const int64_t T = static_cast<int64_t>(ref_.prompt.size()), V = model.config().vocab_size;
  ASSERT_EQ(expected.shape, (std::vector<int64_t>{T, V}));
  const auto logits = prompt_logits(model, ref_.prompt, T, pool_);
  const double err = relative_l2(logits, expected.values);
  RecordProperty("relative_l2", std::to_string(err));
  EXPECT_LT(err, kTolerance) << GetParam();
  // Every position, not just the total: an error confined to late positions must not hide.
  for (int64_t t = 0; t < T; ++t) {
    std::vector<float> row(logits.begin() + t * V, logits.begin() + (t + 1) * V);
    std::vector<double> exp_row(expected.values.begin() + t * V, expected.values.begin() + (t + 1) * V);
    ASSERT_LT(relative_l2(row, exp_row), kTolerance) << GetParam() << " position " << t;
  }
}

TEST_P(Parity, GreedyContinuationMatchesReference) {
  const auto model = Qwen35Model::load(dir_);
  GenerationOptions opt;
  opt.max_tokens = static_cast<int64_t>(ref_.greedy.size());
  const auto out = generate_greedy(model, {ref_.prompt}, opt, pool_);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0], ref_.greedy) << GetParam();
}

TEST_P(Parity, PrefillWindowsMatchTokenByTokenDecode) {
  const auto model = Qwen35Model::load(dir_);
  const auto reference = token_by_token(model, ref_.prompt, pool_);
  for (int64_t window : {int64_t{1}, int64_t{7}, int64_t{64}, static_cast<int64_t>(ref_.prompt.size())}) {
    const auto logits = prompt_logits(model, ref_.prompt, window, pool_);
    EXPECT_LT(relative_l2(logits, reference), kTolerance) << GetParam() << " window " << window;
  }
}

TEST_P(Parity, BatchedDecodeMatchesAlone) {
  const auto model = Qwen35Model::load(dir_);
  const auto& p = ref_.prompt;
  // Three sequences at different positions: the prompt, its second half, and its first 5 tokens.
  const std::vector<std::vector<int32_t>> prompts = {p, {p.begin() + static_cast<long>(p.size() / 2), p.end()}, {p.begin(), p.begin() + 5}};
  const auto r = test::decode_alone_and_batched(model, prompts, {3, 1, 4, 1, 5, 9, 2, 6}, pool_);
  // Row results never depend on the batch (fixed reduction order), so this is exact, not just
  // within tolerance.
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_LT(relative_l2(r.batched[i], r.alone[i]), kTolerance) << GetParam() << " sequence " << i;
    EXPECT_EQ(r.batched[i], r.alone[i]) << GetParam() << " sequence " << i << " differs in the last bits";
  }
}

TEST_P(Parity, CommittedPhaseEqualsTokenByTokenBitwise) {
  const auto model = Qwen35Model::load(dir_);
  const auto reference = token_by_token(model, ref_.prompt, pool_);
  ModelCache cache(model.config().cache_shape(), 1);
  const int slot = cache.acquire();
  auto logits = model.forward({Phase::Committed, {{slot, ref_.prompt}}, true}, cache, pool_);
  EXPECT_EQ(logits, reference) << GetParam();
}

// Greedy steps (StepQueue) pick the argmax of the logits forward returns for the same steps.
TEST_P(Parity, ArgmaxStepsPickTheLogitsArgmax) {
  const auto model = Qwen35Model::load(dir_);
  const int64_t V = model.config().vocab_size;
  ModelCache with_logits(model.config().cache_shape(), 2), with_argmax(model.config().cache_shape(), 2);
  std::vector<float> logits;
  std::vector<int32_t> picked;
  StepQueue queue(model, with_argmax, pool_);
  for (ModelCache* cache : {&with_logits, &with_argmax}) {
    const int a = cache->acquire(), b = cache->acquire();
    model.forward({Phase::Window, {{a, ref_.prompt}, {b, {ref_.prompt.begin(), ref_.prompt.begin() + 5}}}, false}, *cache, pool_);
  }
  for (std::size_t i = 0; i < 3; ++i) {
    Step step{Phase::Decode, {{0, {ref_.greedy[i]}}, {1, {ref_.greedy[i + 1]}}}, false};
    model.forward(step, with_logits, pool_, logits);
    queue.run(step, picked);
    ASSERT_EQ(picked.size(), 2u);
    for (std::size_t r = 0; r < 2; ++r)
      EXPECT_EQ(picked[r], argmax_row(&logits[r * static_cast<std::size_t>(V)], V)) << GetParam() << " step " << i << " row " << r;
  }
}

// Steps queued ahead of the host, taking their tokens from the step before on the device, pick
// what the same steps pick one at a time.
TEST_P(Parity, QueuedArgmaxStepsPickWhatOneAtATimeDoes) {
  const auto model = Qwen35Model::load(dir_);
  const auto [queued, one] = test::queued_and_one_at_a_time(model, ref_.prompt, 6, pool_);
  EXPECT_EQ(queued, one) << GetParam();
  EXPECT_EQ(one.size(), 2u + 3 * 2 + 3);
}

// Greedy generation queues each step before it has seen the last one's tokens; a sequence that
// stops leaves the batch a step late. Outputs are each prompt's own greedy run cut at its stop id.
TEST_P(Parity, GreedyGenerationStopsEachSequenceAtItsStopId) {
  const auto model = Qwen35Model::load(dir_);
  const auto& p = ref_.prompt;
  const std::vector<std::vector<int32_t>> prompts = {p, {p.begin(), p.begin() + 5}, {p.begin() + 2, p.end()}};
  GenerationOptions opt;
  opt.max_tokens = 7;
  opt.prefill_chunk = 4;
  std::vector<std::vector<int32_t>> alone;
  for (const auto& prompt : prompts) alone.push_back(generate_greedy(model, {prompt}, opt, pool_)[0]);
  for (const auto& a : alone) ASSERT_EQ(a.size(), 7u);
  for (std::size_t stop_at : {std::size_t{0}, std::size_t{2}, std::size_t{5}}) {
    opt.stop_ids = {alone[0][stop_at]};
    const auto out = generate_greedy(model, prompts, opt, pool_);
    ASSERT_EQ(out.size(), prompts.size());
    for (std::size_t i = 0; i < prompts.size(); ++i) {
      const auto stop = std::find(alone[i].begin(), alone[i].end(), opt.stop_ids[0]);
      const std::vector<int32_t> want(alone[i].begin(), stop == alone[i].end() ? stop : stop + 1);
      EXPECT_EQ(out[i], want) << GetParam() << " prompt " << i << " stop at " << stop_at;
    }
  }
  opt.stop_ids.clear();
  for (int64_t max_tokens : {0, 1, 2}) {
    opt.max_tokens = max_tokens;
    const auto out = generate_greedy(model, prompts, opt, pool_);
    for (std::size_t i = 0; i < prompts.size(); ++i)
      EXPECT_EQ(out[i], std::vector<int32_t>(alone[i].begin(), alone[i].begin() + max_tokens)) << GetParam() << " max " << max_tokens;
  }
}

// Misuse of the queue is an error naming the problem, and leaves the model usable.
TEST_P(Parity, QueuedArgmaxMisuseIsAClearError) {
  const auto model = Qwen35Model::load(dir_);
  ModelCache cache = model.new_cache(2);
  const int a = cache.acquire();
  std::vector<int32_t> picks;
  auto throws_with = [&](auto&& call, const std::string& words) {
    try {
      call();
      ADD_FAILURE() << "no error; expected one saying " << words;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  };
  StepQueue queue(model, cache, pool_);
  Step first{Phase::Decode, {{a, {ref_.prompt[0]}}}, false};
  first.sequences[0].from_previous = 0;
  throws_with([&] { queue.submit(first); }, "previous step's picks, which has 0");
  first.sequences[0].from_previous = -1;
  queue.submit(first);
  Step next{Phase::Decode, {{a, {0}}}, false};
  next.sequences[0].from_previous = 1;
  throws_with([&] { queue.submit(next); }, "previous step's picks, which has 1");
  next.sequences[0].from_previous = 0;
  throws_with([&] { model.forward(next, cache, pool_); }, "only queued greedy steps");
  queue.submit(next);
  throws_with([&] { queue.submit(next); }, "already in flight");
  throws_with([&] { queue.run({Phase::Window, {{a, {1, 2}}}, false}, picks); }, "still in flight");
  Step window{Phase::Window, {{a, {1, 2}}}, false};
  window.sequences[0].from_previous = 0;
  queue.collect(picks);
  queue.collect(picks);
  throws_with([&] { queue.collect(picks); }, "no step was submitted");
  throws_with([&] { queue.submit(window); }, "only decode steps");
  EXPECT_EQ(queue.in_flight(), 0);
  queue.run({Phase::Decode, {{a, {ref_.prompt[1]}}}, false}, picks);
  EXPECT_EQ(picks.size(), 1u);
}

// Sampling at temperature 0 without penalties (which picks on the model's side) gives greedy
// generation's tokens.
TEST_P(Parity, SampledAtTemperatureZeroIsGreedy) {
  const auto model = Qwen35Model::load(dir_);
  GenerationOptions greedy;
  greedy.max_tokens = 6;
  greedy.prefill_chunk = 5;
  const auto want = generate_greedy(model, {ref_.prompt}, greedy, pool_)[0];
  SampledGenerationOptions opt;
  opt.sampling.temperature = 0.0f;
  opt.max_tokens = 6;
  opt.prefill_chunk = 5;
  ModelCache cache(model.config().cache_shape(), 1);
  const int slot = cache.acquire();
  std::vector<int32_t> got;
  generate_sampled(
      model, cache, slot, ref_.prompt, opt,
      [&](const SampledToken& t) {
        got.push_back(t.id);
        return true;
      },
      pool_);
  EXPECT_EQ(got, want) << GetParam();
}

// Greedy sampled generation runs a step ahead of the host; a stop id, the callback and max_tokens
// still end it at the same token, the slot holding the prompt and all or all but the last generated
// token, and the model is left with no step in flight.
TEST_P(Parity, SampledGreedyStopsWhereItShould) {
  const auto model = Qwen35Model::load(dir_);
  GenerationOptions greedy;
  greedy.max_tokens = 6;
  const auto want = generate_greedy(model, {ref_.prompt}, greedy, pool_)[0];
  struct Case {
    int64_t max_tokens;
    std::vector<int32_t> stop_ids;
    std::size_t callback_stops_at;  // tokens handed over before on_token returns false (0: never)
    std::size_t expect;
  };
  const auto first_stop = static_cast<std::size_t>(std::find(want.begin(), want.end(), want[2]) - want.begin()) + 1;
  for (const Case& c : {Case{6, {}, 0, 6}, Case{1, {}, 0, 1}, Case{6, {want[2]}, 0, first_stop}, Case{6, {}, 4, 4}}) {
    SampledGenerationOptions opt;
    opt.sampling.temperature = 0.0f;
    opt.max_tokens = c.max_tokens;
    opt.stop_ids = c.stop_ids;
    ModelCache cache(model.config().cache_shape(), 1);
    const int slot = cache.acquire();
    std::vector<int32_t> got;
    generate_sampled(
        model, cache, slot, ref_.prompt, opt,
        [&](const SampledToken& t) {
          got.push_back(t.id);
          return got.size() != c.callback_stops_at;
        },
        pool_);
    EXPECT_EQ(got, std::vector<int32_t>(want.begin(), want.begin() + static_cast<long>(c.expect))) << GetParam() << " max " << c.max_tokens;
    const int64_t held = cache.length(slot) - static_cast<int64_t>(ref_.prompt.size());
    EXPECT_TRUE(held == static_cast<int64_t>(got.size()) || held == static_cast<int64_t>(got.size()) - 1) << GetParam() << " holds " << held;
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Parity, ::testing::ValuesIn(test::fixture_names()), [](const auto& info) { return info.param; });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(Parity);

}  // namespace
}  // namespace qwenrt
