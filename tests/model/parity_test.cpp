// The model against the float64 transformers oracle, and the invariances the engine promises:
// prefill windows and batching do not change a sequence's logits.
#include <gtest/gtest.h>

#include "engine/greedy_generation.h"
#include "engine/sampled_generation.h"
#include "formats/npy.h"
#include "model/qwen35_model.h"
#include "support/fixtures.h"

namespace qwenrt {
namespace {

using test::relative_l2;

constexpr double kTolerance = 1e-5;

// Logits of every position, fed one token per decode step.
std::vector<float> token_by_token(const Qwen35Model& model, const std::vector<int32_t>& tokens, ThreadPool& pool) {
  ModelCache cache(model.config(), 1);
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
  const int64_t V = model.config().vocab_size;
  const auto& p = ref_.prompt;
  // Three sequences at different positions: the prompt, its second half, and its first 5 tokens.
  const std::vector<std::vector<int32_t>> prompts = {p, {p.begin() + static_cast<long>(p.size() / 2), p.end()}, {p.begin(), p.begin() + 5}};
  const std::vector<int32_t> follow = {3, 1, 4, 1, 5, 9, 2, 6};

  std::vector<std::vector<float>> alone;
  for (const auto& prompt : prompts) {
    ModelCache cache(model.config(), 1);
    const int slot = cache.acquire();
    model.forward({Phase::Window, {{slot, prompt}}, false}, cache, pool_);
    std::vector<float> all;
    for (int32_t t : follow) {
      auto l = model.forward({Phase::Decode, {{slot, {t}}}, false}, cache, pool_);
      all.insert(all.end(), l.begin(), l.end());
    }
    alone.push_back(all);
  }

  ModelCache cache(model.config(), 3);
  std::vector<int> slots;
  Step prefill{Phase::Window, {}, false};
  for (const auto& prompt : prompts) {
    slots.push_back(cache.acquire());
    prefill.sequences.push_back({slots.back(), prompt});
  }
  model.forward(prefill, cache, pool_);
  std::vector<std::vector<float>> batched(prompts.size());
  for (int32_t t : follow) {
    Step step{Phase::Decode, {}, false};
    for (int s : slots) step.sequences.push_back({s, {t}});
    auto l = model.forward(step, cache, pool_);
    for (std::size_t i = 0; i < prompts.size(); ++i) batched[i].insert(batched[i].end(), l.begin() + static_cast<long>(i * V), l.begin() + static_cast<long>((i + 1) * V));
  }
  // Row results never depend on the batch (fixed reduction order), so this is exact, not just
  // within tolerance.
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_LT(relative_l2(batched[i], alone[i]), kTolerance) << GetParam() << " sequence " << i;
    EXPECT_EQ(batched[i], alone[i]) << GetParam() << " sequence " << i << " differs in the last bits";
  }
}

TEST_P(Parity, CommittedPhaseEqualsTokenByTokenBitwise) {
  const auto model = Qwen35Model::load(dir_);
  const auto reference = token_by_token(model, ref_.prompt, pool_);
  ModelCache cache(model.config(), 1);
  const int slot = cache.acquire();
  auto logits = model.forward({Phase::Committed, {{slot, ref_.prompt}}, true}, cache, pool_);
  EXPECT_EQ(logits, reference) << GetParam();
}

// forward_argmax picks the argmax of the logits forward returns for the same steps.
TEST_P(Parity, ArgmaxStepsPickTheLogitsArgmax) {
  const auto model = Qwen35Model::load(dir_);
  const int64_t V = model.config().vocab_size;
  ModelCache with_logits(model.config(), 2), with_argmax(model.config(), 2);
  std::vector<float> logits;
  std::vector<int32_t> picked;
  for (ModelCache* cache : {&with_logits, &with_argmax}) {
    const int a = cache->acquire(), b = cache->acquire();
    model.forward({Phase::Window, {{a, ref_.prompt}, {b, {ref_.prompt.begin(), ref_.prompt.begin() + 5}}}, false}, *cache, pool_);
  }
  for (std::size_t i = 0; i < 3; ++i) {
    Step step{Phase::Decode, {{0, {ref_.greedy[i]}}, {1, {ref_.greedy[i + 1]}}}, false};
    model.forward(step, with_logits, pool_, logits);
    model.forward_argmax(step, with_argmax, pool_, picked);
    ASSERT_EQ(picked.size(), 2u);
    for (std::size_t r = 0; r < 2; ++r)
      EXPECT_EQ(picked[r], argmax_row(&logits[r * static_cast<std::size_t>(V)], V)) << GetParam() << " step " << i << " row " << r;
  }
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
  ModelCache cache(model.config(), 1);
  const int slot = cache.acquire();
  std::vector<int32_t> got;
  generate_sampled(model, cache, slot, ref_.prompt, opt, [&](const SampledToken& t) {
    got.push_back(t.id);
    return true;
  }, pool_);
  EXPECT_EQ(got, want) << GetParam();
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Parity, ::testing::ValuesIn(test::fixture_names()),
                         [](const auto& info) { return info.param; });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(Parity);

}  // namespace
}  // namespace qwenrt
