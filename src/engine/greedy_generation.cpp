#include "engine/greedy_generation.h"

#include <algorithm>
#include <deque>

#include "core/error.h"
#include "engine/step_queue.h"

namespace qwenrt {

std::vector<float> prompt_logits(const Qwen35Model& model, const std::vector<int32_t>& tokens, int64_t prefill_chunk, ThreadPool& pool) {
  if (tokens.empty()) fail("no prompt tokens");
  if (prefill_chunk < 1) fail("prefill chunk must be at least 1, got ", prefill_chunk);
  ModelCache cache = model.new_cache(1);
  const int slot = cache.acquire();
  std::vector<float> all, logits;
  for (std::size_t b = 0; b < tokens.size(); b += static_cast<std::size_t>(prefill_chunk)) {
    const std::size_t e = std::min(tokens.size(), b + static_cast<std::size_t>(prefill_chunk));
    Step step{Phase::Window, {{slot, std::vector<int32_t>(tokens.begin() + static_cast<long>(b), tokens.begin() + static_cast<long>(e))}}, true};
    model.forward(step, cache, pool, logits);
    all.insert(all.end(), logits.begin(), logits.end());
  }
  return all;
}

std::vector<std::vector<int32_t>> generate_greedy(const Qwen35Model& model, const std::vector<std::vector<int32_t>>& prompts,
                                                  const GenerationOptions& opt, ThreadPool& pool) {
  if (opt.prefill_chunk < 1) fail("prefill chunk must be at least 1, got ", opt.prefill_chunk);
  if (opt.max_tokens < 0) fail("max tokens must not be negative");
  for (const auto& p : prompts)
    if (p.empty()) fail("every prompt needs at least one token");
  const std::size_t n = prompts.size();
  ModelCache cache = model.new_cache(static_cast<int>(std::max<std::size_t>(n, 1)));
  std::vector<int> slots(n);
  for (auto& s : slots) s = cache.acquire();
  std::vector<std::vector<int32_t>> out(n);
  std::vector<int32_t> next(n);
  std::vector<bool> done(n, opt.max_tokens == 0);
  std::vector<int32_t> picked;  // each stepped sequence's argmax token
  StepQueue queue(model, cache, pool);

  // Prefill: every prompt advances by one window per step; a prompt's last window yields its
  // first generated token.
  std::vector<std::size_t> fed(n, 0);
  for (;;) {
    Step step{Phase::Window, {}, false};
    std::vector<std::size_t> who;
    for (std::size_t i = 0; i < n; ++i) {
      if (done[i] || fed[i] == prompts[i].size()) continue;
      const std::size_t e = std::min(prompts[i].size(), fed[i] + static_cast<std::size_t>(opt.prefill_chunk));
      step.sequences.push_back(
          {slots[i], std::vector<int32_t>(prompts[i].begin() + static_cast<long>(fed[i]), prompts[i].begin() + static_cast<long>(e))});
      fed[i] = e;
      who.push_back(i);
    }
    if (who.empty()) break;
    queue.run(step, picked);
    for (std::size_t j = 0; j < who.size(); ++j)
      if (fed[who[j]] == prompts[who[j]].size()) next[who[j]] = picked[j];
  }

  auto accept = [&](std::size_t i) {
    out[i].push_back(next[i]);
    const bool stop = std::find(opt.stop_ids.begin(), opt.stop_ids.end(), next[i]) != opt.stop_ids.end();
    if (stop || static_cast<int64_t>(out[i].size()) >= opt.max_tokens) done[i] = true;
  };
  for (std::size_t i = 0; i < n; ++i)
    if (!done[i]) accept(i);

  // Decode, one step ahead of the host: step k + 1 is queued before step k's picks come back, each
  // sequence taking its step-k pick on the device. While the host reads step k's tokens, the GPU
  // already runs k + 1. A sequence that stops at step k had k + 1 computed for nothing; its slot
  // goes with the cache.
  std::vector<int64_t> owed(n, 0);  // tokens submitted for sequence i and not yet collected
  std::vector<std::size_t> last;    // sequences of the step submitted last, by row
  std::deque<std::vector<std::size_t>> in_flight;
  auto submit = [&] {
    Step step{Phase::Decode, {}, false};
    std::vector<std::size_t> who;
    for (std::size_t i = 0; i < n; ++i) {
      if (done[i] || static_cast<int64_t>(out[i].size()) + owed[i] >= opt.max_tokens) continue;
      StepSequence seq{slots[i], {next[i]}};
      if (owed[i] > 0) {  // its last token is still on the device: the last step's row for it
        seq.tokens = {0};
        seq.from_previous = static_cast<int32_t>(std::find(last.begin(), last.end(), i) - last.begin());
      }
      step.sequences.push_back(std::move(seq));
      who.push_back(i);
    }
    if (who.empty()) return false;
    queue.submit(step);
    for (std::size_t i : who) ++owed[i];
    last = who;
    in_flight.push_back(std::move(who));
    return true;
  };
  try {
    for (;;) {
      while (static_cast<int>(in_flight.size()) < StepQueue::kMaxInFlight && submit()) {}
      if (in_flight.empty()) break;
      queue.collect(picked);
      const std::vector<std::size_t> who = std::move(in_flight.front());
      in_flight.pop_front();
      for (std::size_t j = 0; j < who.size(); ++j) {
        const std::size_t i = who[j];
        --owed[i];
        if (done[i]) continue;  // stopped at the step before: this pick is not wanted
        next[i] = picked[j];
        accept(i);
      }
    }
  } catch (...) {
    queue.discard();
    throw;
  }
  return out;
}

}  // namespace qwenrt
