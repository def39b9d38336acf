// What a step takes besides token ids and gives besides logits: given embedding rows (vision
// features, MTP inputs), the final hidden rows (MTP's input), and the context limit.
#include <gtest/gtest.h>

#include <string>

#include "backend/cpu/matmul.h"
#include "core/error.h"
#include "model/qwen35_model.h"
#include "support/fixtures.h"

namespace qwenrt {
namespace {

class StepIoTest : public ::testing::Test {
 protected:
  void SetUp() override { ref_ = test::load_reference("dense_untied"); }
  Qwen35Model model_ = Qwen35Model::load(test::fixtures_dir() / "dense_untied");
  test::Reference ref_;
  ThreadPool pool_{2};
};

// A row whose given embedding is its token's own embedding computes the same bits as the token; a
// different row changes that row's and later rows' logits, not earlier ones'.
TEST_F(StepIoTest, GivenEmbeddingRowsReplaceTheirTokens) {
  const int64_t H = model_.config().hidden_size, V = model_.config().vocab_size;
  auto run = [&](const StepSequence& seq) {
    ModelCache cache = model_.new_cache(1);
    cache.acquire();
    return model_.forward({Phase::Window, {seq}, true}, cache, pool_);
  };
  const std::vector<int32_t> prompt(ref_.prompt.begin(), ref_.prompt.begin() + 6);
  const std::vector<float> plain = run({0, prompt});
  StepSequence same{0, prompt};
  same.embedding_rows = {2, 4};
  same.embeddings.resize(static_cast<std::size_t>(2 * H));
  model_.weights().embed.row_to_f32(prompt[2], same.embeddings.data());
  model_.weights().embed.row_to_f32(prompt[4], same.embeddings.data() + H);
  EXPECT_EQ(run(same), plain);

  StepSequence other = same;
  for (int64_t i = 0; i < H; ++i) other.embeddings[static_cast<std::size_t>(i)] *= -1.5f;
  const std::vector<float> changed = run(other);
  const auto row = [&](const std::vector<float>& l, int64_t r) { return std::vector<float>(l.begin() + r * V, l.begin() + (r + 1) * V); };
  EXPECT_EQ(row(changed, 1), row(plain, 1));
  EXPECT_NE(row(changed, 2), row(plain, 2));
  EXPECT_NE(row(changed, 5), row(plain, 5));
}

TEST_F(StepIoTest, BadEmbeddingRowsAreClearErrors) {
  ModelCache cache = model_.new_cache(1);
  cache.acquire();
  auto error_of = [&](const StepSequence& seq) {
    try {
      model_.forward({Phase::Window, {seq}, false}, cache, pool_);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const int64_t H = model_.config().hidden_size;
  StepSequence s{0, {1, 2, 3}};
  s.embedding_rows = {1};
  EXPECT_NE(error_of(s).find("embedding values for 1 rows"), std::string::npos) << error_of(s);
  s.embeddings.assign(static_cast<std::size_t>(2 * H), 0.0f);
  s.embedding_rows = {2, 1};
  EXPECT_NE(error_of(s).find("ascending"), std::string::npos) << error_of(s);
  s.embedding_rows = {1, 3};
  EXPECT_NE(error_of(s).find("row 3 is not"), std::string::npos) << error_of(s);
}

// The hidden rows are what the head reads: their product with lm_head gives the logits, bit for bit.
TEST_F(StepIoTest, HiddenRowsAreWhatTheHeadReads) {
  ModelCache cache = model_.new_cache(2);
  const int a = cache.acquire(), b = cache.acquire();
  Step step{Phase::Window, {{a, ref_.prompt}, {b, {ref_.prompt.begin(), ref_.prompt.begin() + 3}}}, false};
  step.hidden = true;
  StepOutput out;
  model_.forward(step, cache, pool_, out);
  const int64_t H = model_.config().hidden_size, V = model_.config().vocab_size;
  ASSERT_EQ(out.hidden.size(), static_cast<std::size_t>(2 * H));
  std::vector<float> logits(static_cast<std::size_t>(2 * V));
  cpu::matmul(out.hidden.data(), 2, model_.weights().lm_head, logits.data(), pool_);
  EXPECT_EQ(logits, out.logits);
  step.hidden = false;
  model_.forward({Phase::Decode, {{a, {ref_.greedy[0]}}}, false}, cache, pool_, out);
  EXPECT_TRUE(out.hidden.empty());
}

// A sequence may not run past max_position_embeddings.
TEST_F(StepIoTest, ContextLimitIsEnforced) {
  ModelConfig config = model_.config();
  config.max_position_embeddings = 8;
  const Qwen35Model limited(config, model_.weights());
  ModelCache cache = limited.new_cache(1);
  const int slot = cache.acquire();
  limited.forward({Phase::Window, {{slot, {1, 2, 3, 4, 5, 6, 7}}}, false}, cache, pool_);
  limited.forward({Phase::Decode, {{slot, {8}}}, false}, cache, pool_);
  try {
    limited.forward({Phase::Decode, {{slot, {9}}}, false}, cache, pool_);
    ADD_FAILURE() << "no error past the context";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("would reach 9 tokens, past the model's context of 8 (max_position_embeddings"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(cache.length(slot), 8);
}

}  // namespace
}  // namespace qwenrt
