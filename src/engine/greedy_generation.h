#pragma once
// The simplest driver of the engine: prompts prefilled in windows, then greedy decoding of all
// sequences together in one ragged batch until each hits max_tokens or a stop id.
#include <cstdint>
#include <vector>

#include "core/thread_pool.h"
#include "model/qwen35_model.h"

namespace qwenrt {

struct GenerationOptions {
  int64_t max_tokens = 16;
  std::vector<int32_t> stop_ids;
  int64_t prefill_chunk = 512;  // window size for prompt prefill
};

// Logits [T, V] for every position of `tokens`, prefilled in windows of `prefill_chunk`.
std::vector<float> prompt_logits(const Qwen35Model& model, const std::vector<int32_t>& tokens, int64_t prefill_chunk, ThreadPool& pool);

// Greedy continuation of each prompt (generated ids only; a stop id is included when hit).
std::vector<std::vector<int32_t>> generate_greedy(const Qwen35Model& model, const std::vector<std::vector<int32_t>>& prompts,
                                                  const GenerationOptions& options, ThreadPool& pool);

}  // namespace qwenrt
