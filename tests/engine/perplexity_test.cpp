// Perplexity against the float64 oracle: over one window it is exp of the mean −log softmax of the
// reference logits (tests/fixtures, transformers in float64); over several windows each window
// starts from an empty cache, so it equals the windows' prompts scored on their own.
#include "engine/perplexity.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "engine/greedy_generation.h"
#include "formats/npy.h"
#include "support/fixtures.h"

namespace qwenrt {
namespace {

// Σ −log softmax(logits[t])[tokens[t + 1]] over rows [0, T − 1) of a [T, V] matrix.
template <typename Logits>
double nll(const Logits& logits, const std::vector<int32_t>& tokens, int64_t V) {
  double total = 0;
  for (std::size_t t = 0; t + 1 < tokens.size(); ++t) {
    double mx = -INFINITY, sum = 0;
    for (int64_t v = 0; v < V; ++v) mx = std::max(mx, static_cast<double>(logits[t * V + v]));
    for (int64_t v = 0; v < V; ++v) sum += std::exp(static_cast<double>(logits[t * V + v]) - mx);
    total += mx + std::log(sum) - static_cast<double>(logits[t * V + tokens[t + 1]]);
  }
  return total;
}

TEST(Perplexity, OneWindowMatchesTheFloat64Reference) {
  for (const char* fixture : {"dense_tied", "moe", "mlx_q4_g64", "fp8_dense"}) {
    const auto dir = test::fixtures_dir() / fixture;
    const auto model = Qwen35Model::load(dir);
    const auto ref = test::load_reference(fixture);
    const auto expected = read_npy(dir / "logits.npy");
    ThreadPool pool(2);
    const int64_t T = static_cast<int64_t>(ref.prompt.size());
    const auto r = perplexity(model, ref.prompt, T, 16, pool);
    EXPECT_EQ(r.windows, 1);
    EXPECT_EQ(r.tokens_scored, T - 1);
    const double want = std::exp(nll(expected.values, ref.prompt, model.config().vocab_size) / static_cast<double>(T - 1));
    EXPECT_NEAR(r.perplexity / want, 1.0, 1e-5) << fixture << ": " << r.perplexity << " vs float64 " << want;
  }
}

TEST(Perplexity, WindowsAreScoredFromAnEmptyCache) {
  const auto model = Qwen35Model::load(test::fixtures_dir() / "dense_tied");
  const auto ref = test::load_reference("dense_tied");
  ThreadPool pool(2);
  const int64_t ctx = 24, V = model.config().vocab_size;
  const auto r = perplexity(model, ref.prompt, ctx, ctx, pool);
  const auto chunked = perplexity(model, ref.prompt, ctx, 7, pool);  // smaller forward calls: the same up to rounding
  EXPECT_NEAR(chunked.perplexity / r.perplexity, 1.0, 1e-5);
  double total = 0;
  int64_t scored = 0, windows = 0;
  for (std::size_t w0 = 0; w0 + 1 < ref.prompt.size(); w0 += ctx) {
    const std::vector<int32_t> window(ref.prompt.begin() + static_cast<long>(w0),
                                      ref.prompt.begin() + static_cast<long>(std::min(ref.prompt.size(), w0 + ctx)));
    total += nll(prompt_logits(model, window, static_cast<int64_t>(window.size()), pool), window, V);
    scored += static_cast<int64_t>(window.size()) - 1;
    ++windows;
  }
  EXPECT_EQ(r.windows, windows);
  EXPECT_EQ(r.tokens_scored, scored);
  EXPECT_NEAR(r.perplexity / std::exp(total / static_cast<double>(scored)), 1.0, 1e-9);
}

TEST(Perplexity, TooLittleIsAnError) {
  const auto model = Qwen35Model::load(test::fixtures_dir() / "dense_tied");
  ThreadPool pool(1);
  EXPECT_THROW(perplexity(model, {5}, 16, 16, pool), Error);
  EXPECT_THROW(perplexity(model, {5, 6, 7}, 1, 16, pool), Error);
}

}  // namespace
}  // namespace qwenrt
