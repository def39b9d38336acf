#include "engine/step_queue.h"

#include "core/error.h"

namespace qwenrt {

StepQueue::~StepQueue() {
  try {
    discard();
  } catch (...) {  // a device error while unwinding: nothing more to do with its picks
  }
}

void StepQueue::submit(const Step& step) {
  if (in_flight() >= kMaxInFlight) fail("submit: ", kMaxInFlight, " steps are already in flight; collect one first");
  PendingStep p = model_.enqueue_argmax(step, cache_, pool_, have_last_ ? &last_ : nullptr);
  // On the CPU the picks are there already: the next step may take them from `last_`.
  last_ = p;
  have_last_ = true;
  in_flight_.push_back(std::move(p));
}

void StepQueue::collect(std::vector<int32_t>& picks) {
  if (in_flight_.empty()) fail("collect: no step was submitted");
  PendingStep p = std::move(in_flight_.front());
  in_flight_.pop_front();
  const bool is_last = in_flight_.empty();
  model_.wait_argmax(p, picks);
  if (is_last) last_ = std::move(p);  // its picks (the CPU reads them for from_previous)
}

void StepQueue::run(const Step& step, std::vector<int32_t>& picks) {
  if (!in_flight_.empty()) fail("run: ", in_flight_.size(), " steps are still in flight; collect them first");
  submit(step);
  collect(picks);
}

void StepQueue::discard() {
  std::vector<int32_t> dropped;
  while (!in_flight_.empty()) collect(dropped);
}

}  // namespace qwenrt
