#pragma once
// Greedy runs that keep every logits row a token was picked from, plain and with MTP speculation:
// what the speculation tests (CPU and GPU) compare bit for bit.
#include <span>
#include <vector>

#include "engine/mtp_speculator.h"
#include "model/qwen35_model.h"

namespace qwenrt::test {

struct Traced {
  std::vector<int32_t> tokens;
  std::vector<float> logits;  // the rows each token was picked from
  SpeculationStats stats;
};

// Plain greedy decoding: prefill in one window, then one decode step per token.
inline Traced plain_greedy(const Qwen35Model& m, const std::vector<int32_t>& prompt, int n, ThreadPool& pool) {
  ModelCache cache = m.new_cache(1);
  const int s = cache.acquire();
  const int64_t V = m.config().vocab_size;
  Traced t;
  auto logits = m.forward({Phase::Window, {{s, prompt}}, false}, cache, pool);
  for (int i = 0; i < n; ++i) {
    t.logits.insert(t.logits.end(), logits.begin(), logits.end());
    t.tokens.push_back(argmax_row(logits.data(), V));
    if (i + 1 < n) logits = m.forward({Phase::Decode, {{s, {t.tokens.back()}}}, false}, cache, pool);
  }
  return t;
}

inline Traced speculative_greedy(const Qwen35Model& m, const std::vector<int32_t>& prompt, int n, const SpeculationOptions& o, ThreadPool& pool) {
  ModelCache cache = m.new_cache(1), mtp = m.new_mtp_cache(1);
  MtpSpeculator spec(m, cache, cache.acquire(), mtp, mtp.acquire(), o, pool);
  const int64_t V = m.config().vocab_size;
  Traced t;
  auto pick = [&](std::span<const float> l) {
    t.logits.insert(t.logits.end(), l.begin(), l.end());
    t.tokens.push_back(argmax_row(l.data(), V));
    return RowPick{t.tokens.back(), static_cast<int>(t.tokens.size()) >= n};
  };
  const RowPick first = pick(spec.prefill(prompt, static_cast<int64_t>(prompt.size())));
  bool stopped = first.stop;
  if (!stopped) spec.start(first.token);
  while (!stopped) spec.round(n - static_cast<int64_t>(t.tokens.size()), pick, stopped);
  t.stats = spec.stats();
  return t;
}

}  // namespace qwenrt::test
