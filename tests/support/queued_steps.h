#pragma once
// Greedy decode of two sequences run two ways, for the tests of steps queued ahead of the host:
// one step at a time with the picks fed back by the host (StepQueue::run), and queued
// StepQueue::kMaxInFlight deep with each step taking the picks of the one before on the device
// (StepQueue::submit, from_previous). The second sequence leaves after three steps, so the batch
// changes under a queued step. Both give every step's picks, in order; they must be equal.
#include <utility>
#include <vector>

#include "engine/step_queue.h"
#include "model/qwen35_model.h"

namespace qwenrt::test {

inline std::pair<std::vector<int32_t>, std::vector<int32_t>> queued_and_one_at_a_time(const Qwen35Model& model, const std::vector<int32_t>& prompt,
                                                                                      int steps, ThreadPool& pool) {
  constexpr int kBothSteps = 3;
  auto prefill = [&](StepQueue& queue, ModelCache& cache, std::vector<int32_t>& picks) {
    const int a = cache.acquire(), b = cache.acquire();
    queue.run({Phase::Window, {{a, prompt}, {b, {prompt.begin(), prompt.begin() + 5}}}, false}, picks);
    return std::vector<int32_t>(picks);
  };

  std::vector<int32_t> one, picks;
  {
    ModelCache cache = model.new_cache(2);
    StepQueue queue(model, cache, pool);
    std::vector<int32_t> last = prefill(queue, cache, picks);
    one = last;
    for (int k = 0; k < steps; ++k) {
      Step step{Phase::Decode, {{0, {last[0]}}}, false};
      if (k < kBothSteps) step.sequences.push_back({1, {last[1]}});
      queue.run(step, last);
      one.insert(one.end(), last.begin(), last.end());
    }
  }

  std::vector<int32_t> queued;
  ModelCache cache = model.new_cache(2);
  StepQueue queue(model, cache, pool);
  queued = prefill(queue, cache, picks);
  for (int k = 0; k < steps; ++k) {
    Step step{Phase::Decode, {{0, {0}}}, false};
    step.sequences[0].from_previous = 0;
    if (k < kBothSteps) {
      step.sequences.push_back({1, {0}});
      step.sequences[1].from_previous = 1;
    }
    queue.submit(step);
    if (queue.in_flight() == StepQueue::kMaxInFlight) {
      queue.collect(picks);
      queued.insert(queued.end(), picks.begin(), picks.end());
    }
  }
  while (queue.in_flight() > 0) {
    queue.collect(picks);
    queued.insert(queued.end(), picks.begin(), picks.end());
  }
  return {std::move(queued), std::move(one)};
}

}  // namespace qwenrt::test
