#pragma once
// Sequences decoded alone and in one batch: each prompt prefilled and then fed `follow` one token
// per decode step, first each on its own cache, then all in the same steps. Returns every decode
// step's logits per prompt, both ways (a row's result must not depend on the batch).
#include <vector>

#include "model/qwen35_model.h"

namespace qwenrt::test {

struct AloneAndBatched {
  std::vector<std::vector<float>> alone, batched;  // [prompt][step · V + v]
};

inline AloneAndBatched decode_alone_and_batched(const Qwen35Model& model, const std::vector<std::vector<int32_t>>& prompts,
                                                const std::vector<int32_t>& follow, ThreadPool& pool) {
  const int64_t V = model.config().vocab_size;
  AloneAndBatched out;
  for (const auto& prompt : prompts) {
    ModelCache cache(model.config().cache_shape(), 1);
    const int slot = cache.acquire();
    model.forward({Phase::Window, {{slot, prompt}}, false}, cache, pool);
    std::vector<float> all;
    for (int32_t t : follow) {
      auto l = model.forward({Phase::Decode, {{slot, {t}}}, false}, cache, pool);
      all.insert(all.end(), l.begin(), l.end());
    }
    out.alone.push_back(all);
  }
  ModelCache cache(model.config().cache_shape(), static_cast<int>(prompts.size()));
  std::vector<int> slots;
  Step prefill{Phase::Window, {}, false};
  for (const auto& prompt : prompts) {
    slots.push_back(cache.acquire());
    prefill.sequences.push_back({slots.back(), prompt});
  }
  model.forward(prefill, cache, pool);
  out.batched.resize(prompts.size());
  for (int32_t t : follow) {
    Step step{Phase::Decode, {}, false};
    for (int s : slots) step.sequences.push_back({s, {t}});
    auto l = model.forward(step, cache, pool);
    for (std::size_t i = 0; i < prompts.size(); ++i)
      out.batched[i].insert(out.batched[i].end(), l.begin() + static_cast<long>(i * V), l.begin() + static_cast<long>((i + 1) * V));
  }
  return out;
}

}  // namespace qwenrt::test
