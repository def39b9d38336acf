#pragma once
// Greedy decode of two sequences run two ways, for the tests of steps queued ahead of the host:
// one step at a time with the picks fed back by the host (forward_argmax), and queued
// Qwen35Model::kArgmaxInFlight deep with each step taking the picks of the one before on the
// device (submit_argmax, from_previous). The second sequence leaves after three steps, so the batch
// changes under a queued step. Both give every step's picks, in order; they must be equal.
#include <utility>
#include <vector>

#include "model/qwen35_model.h"

namespace qwenrt::test {

inline std::pair<std::vector<int32_t>, std::vector<int32_t>> queued_and_one_at_a_time(const Qwen35Model& model,
                                                                                      const std::vector<int32_t>& prompt, int steps,
                                                                                      ThreadPool& pool) {
  constexpr int kBothSteps = 3;
  auto prefill = [&](ModelCache& cache, std::vector<int32_t>& picks) {
    const int a = cache.acquire(), b = cache.acquire();
    model.forward_argmax({Phase::Window, {{a, prompt}, {b, {prompt.begin(), prompt.begin() + 5}}}, false}, cache, pool, picks);
    return std::vector<int32_t>(picks);
  };

  std::vector<int32_t> one, picks;
  {
    ModelCache cache = model.new_cache(2);
    std::vector<int32_t> last = prefill(cache, picks);
    one = last;
    for (int k = 0; k < steps; ++k) {
      Step step{Phase::Decode, {{0, {last[0]}}}, false};
      if (k < kBothSteps) step.sequences.push_back({1, {last[1]}});
      model.forward_argmax(step, cache, pool, last);
      one.insert(one.end(), last.begin(), last.end());
    }
  }

  std::vector<int32_t> queued;
  ModelCache cache = model.new_cache(2);
  queued = prefill(cache, picks);
  for (int k = 0; k < steps; ++k) {
    Step step{Phase::Decode, {{0, {0}}}, false};
    step.sequences[0].from_previous = 0;
    if (k < kBothSteps) {
      step.sequences.push_back({1, {0}});
      step.sequences[1].from_previous = 1;
    }
    model.submit_argmax(step, cache, pool);
    if (model.argmax_in_flight() == Qwen35Model::kArgmaxInFlight) {
      model.collect_argmax(picks);
      queued.insert(queued.end(), picks.begin(), picks.end());
    }
  }
  while (model.argmax_in_flight() > 0) {
    model.collect_argmax(picks);
    queued.insert(queued.end(), picks.begin(), picks.end());
  }
  return {std::move(queued), std::move(one)};
}

}  // namespace qwenrt::test
