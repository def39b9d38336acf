#pragma once
// Perplexity of a token stream under the model: the stream is cut into consecutive windows of
// `context` tokens, each scored from an empty cache (its first token is context only), and every
// other token contributes −log p(token | the window's tokens before it), with the softmax taken in
// double over the f32 logits. perplexity = exp(total / tokens scored).
#include <cstdint>
#include <vector>

#include "core/thread_pool.h"
#include "model/qwen35_model.h"

namespace qwenrt {

struct PerplexityResult {
  int64_t tokens = 0;         // tokens in the stream
  int64_t tokens_scored = 0;  // tokens with a prediction (all but each window's first)
  int64_t windows = 0;
  double nll = 0;  // summed negative log-likelihood (nats)
  double perplexity = 0;
  double seconds = 0;  // forward passes only
};

// prefill_chunk: rows per forward call inside a window (bounds the logits held at once).
PerplexityResult perplexity(const Qwen35Model& model, const std::vector<int32_t>& tokens, int64_t context, int64_t prefill_chunk, ThreadPool& pool);

}  // namespace qwenrt
