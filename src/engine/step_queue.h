#pragma once
// Greedy steps queued ahead of the host. The model picks each wanted row's argmax where it runs
// (Qwen35Model::enqueue_argmax); this queue keeps the steps submitted and not yet collected, oldest
// first, at most Qwen35Model::kMaxStepsInFlight of them. A decode step's sequence may take the pick
// of a row of the step submitted just before (StepSequence::from_previous), so step k + 1 is queued
// before the host has seen step k's tokens: while the host reads them, the device runs k + 1.
#include <deque>
#include <vector>

#include "cache/model_cache.h"
#include "core/thread_pool.h"
#include "model/qwen35_model.h"

namespace qwenrt {

class StepQueue {
 public:
  static constexpr int kMaxInFlight = Qwen35Model::kMaxStepsInFlight;

  StepQueue(const Qwen35Model& model, ModelCache& cache, ThreadPool& pool) : model_(model), cache_(cache), pool_(pool) {}
  ~StepQueue();  // waits for and drops the steps still in flight
  StepQueue(const StepQueue&) = delete;
  StepQueue& operator=(const StepQueue&) = delete;

  // Validates and books the step and returns at once (Error when kMaxInFlight are in flight, or a
  // from_previous row the step before does not have).
  void submit(const Step& step);
  // Waits for the oldest step and gives its picks, one per wanted row.
  void collect(std::vector<int32_t>& picks);
  // submit then collect, with nothing else in flight.
  void run(const Step& step, std::vector<int32_t>& picks);
  int in_flight() const { return static_cast<int>(in_flight_.size()); }
  // Waits for and drops every step in flight (a generation that stops early or throws).
  void discard();

 private:
  const Qwen35Model& model_;
  ModelCache& cache_;
  ThreadPool& pool_;
  std::deque<PendingStep> in_flight_;
  PendingStep last_;  // the step submitted last: from_previous names its rows
  bool have_last_ = false;
};

}  // namespace qwenrt
