#include "engine/perplexity.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "core/error.h"

namespace qwenrt {

PerplexityResult perplexity(const Qwen35Model& model, const std::vector<int32_t>& tokens, int64_t context, int64_t prefill_chunk, ThreadPool& pool) {
  if (context < 2) fail("perplexity: the context must be at least 2 tokens, got ", context);
  if (prefill_chunk < 1) fail("perplexity: the prefill chunk must be at least 1, got ", prefill_chunk);
  const int64_t n = static_cast<int64_t>(tokens.size());
  if (n < 2) fail("perplexity: the text has ", n, " tokens; at least 2 are needed");
  const int64_t V = model.config().vocab_size;
  PerplexityResult r;
  r.tokens = n;
  std::vector<float> logits;
  double seconds = 0;
  for (int64_t w0 = 0; w0 + 1 < n; w0 += context) {
    const int64_t w1 = std::min(n, w0 + context);
    ModelCache cache = model.new_cache(1);
    const int slot = cache.acquire();
    ++r.windows;
    for (int64_t b = w0; b < w1; b += prefill_chunk) {
      const int64_t e = std::min(w1, b + prefill_chunk);
      Step step{Phase::Window, {{slot, std::vector<int32_t>(tokens.begin() + b, tokens.begin() + e)}}, true};
      const auto t0 = std::chrono::steady_clock::now();
      model.forward(step, cache, pool, logits);
      seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      // Row t predicts token t + 1 when that token is in the same window.
      for (int64_t t = b; t < e && t + 1 < w1; ++t) {
        const float* row = logits.data() + (t - b) * V;
        double mx = row[0];
        for (int64_t v = 1; v < V; ++v) mx = std::max(mx, static_cast<double>(row[v]));
        double sum = 0;
        for (int64_t v = 0; v < V; ++v) sum += std::exp(static_cast<double>(row[v]) - mx);
        r.nll += mx + std::log(sum) - static_cast<double>(row[tokens[static_cast<std::size_t>(t + 1)]]);
        ++r.tokens_scored;
      }
    }
  }
  r.perplexity = std::exp(r.nll / static_cast<double>(r.tokens_scored));
  r.seconds = seconds;
  return r;
}

}  // namespace qwenrt
