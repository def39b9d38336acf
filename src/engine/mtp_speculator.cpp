#include "engine/mtp_speculator.h"

#include <algorithm>
#include <chrono>
#include <limits>

#include "core/error.h"

namespace qwenrt {

namespace {
double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
}  // namespace

MtpSpeculator::MtpSpeculator(const Qwen35Model& model, ModelCache& cache, int slot, ModelCache& mtp_cache, int mtp_slot,
                             const SpeculationOptions& options, ThreadPool& pool)
    : model_(model),
      cache_(cache),
      slot_(slot),
      pool_(pool),
      drafter_(model, mtp_cache, mtp_slot, 0, options),
      forced_accept_rate_(options.forced_accept_rate) {
  if (cache.length(slot) != 0) fail("internal: speculation starts from fresh cache slots");
}

std::span<const float> MtpSpeculator::prefill(const std::vector<int32_t>& prompt, int64_t chunk) {
  if (prompt.empty()) fail("the prompt is empty");
  if (chunk < 1) fail("prefill chunk must be at least 1");
  // Every row's hidden state goes to the MTP block's own prefill (it attends over all rows): the
  // pairs (h_t, x_{t+1}) for t < n − 1; row n − 1 waits for the first generated token.
  for (std::size_t b = 0; b < prompt.size(); b += static_cast<std::size_t>(chunk)) {
    const std::size_t e = std::min(prompt.size(), b + static_cast<std::size_t>(chunk));
    // Every row's hidden row, the last row's logits.
    Step step{Phase::Window, {{slot_, {prompt.begin() + static_cast<long>(b), prompt.begin() + static_cast<long>(e)}}}, false};
    step.hidden_all = true;
    model_.forward(step, cache_, pool_, out_);
    drafter_.add_hidden(out_.hidden);
    drafter_.add_tokens(std::span<const int32_t>(prompt).subspan(b + 1, std::min(prompt.size(), e + 1) - (b + 1)));
    drafter_.flush(chunk, pool_);
  }
  const auto V = static_cast<std::size_t>(model_.config().vocab_size);
  return {out_.logits.data() + out_.logits.size() - V, V};
}

void MtpSpeculator::start(int32_t first_token) {
  if (next_ >= 0) fail("internal: start() comes once, after prefill()");
  next_ = first_token;
  drafter_.add_tokens(std::span<const int32_t>(&next_, 1));
}

std::vector<int32_t> MtpSpeculator::round(int64_t max_tokens, const PickFn& pick, bool& stopped) {
  if (next_ < 0) fail("internal: round() before start()");
  if (max_tokens < 1) fail("internal: a round emits at least one token");
  const double t0 = now_s();
  const int64_t p = cache_.length(slot_);
  const int64_t limit = model_.config().max_position_embeddings;
  int64_t room = max_tokens - 1;  // drafts beyond the tokens still wanted are never emitted
  if (limit > 0) room = std::min(room, limit - p - 1);
  const int k = drafter_.choose(room);

  std::vector<int32_t> drafts;
  double catch_up_s = 0;
  if (k > 0) drafts = drafter_.draft(k, pool_, catch_up_s);
  const double t1 = now_s();

  // Verify [pending, d1 .. dk] in one step, each row as a lone decode row computes it.
  Step verify{k == 0 ? Phase::Decode : Phase::Committed, {{slot_, {next_}}}, true, true};
  verify.sequences[0].tokens.insert(verify.sequences[0].tokens.end(), drafts.begin(), drafts.end());
  if (k > 0) cache_.keep_row_states(slot_, k + 1);
  model_.forward(verify, cache_, pool_, out_);

  const auto V = static_cast<std::size_t>(model_.config().vocab_size);
  std::vector<int32_t> emitted;
  const int keep = accept_drafts(
      drafts,
      [&](int row) {
        float* logits = out_.logits.data() + static_cast<std::size_t>(row) * V;
        if (forced_accept_rate_ >= 0 && row < k) {
          // Mechanics only: the row agrees with its draft with the forced probability.
          const int32_t draft = drafts[static_cast<std::size_t>(row)];
          if (std::uniform_real_distribution<double>(0, 1)(forced_coin_) < forced_accept_rate_) logits[draft] = std::numeric_limits<float>::infinity();
          else if (argmax_row(logits, static_cast<int64_t>(V)) == draft) logits[draft] = -std::numeric_limits<float>::infinity();
        }
        return pick({logits, V});
      },
      emitted, stopped);
  keep_verified_rows(cache_, slot_, p, k, keep);
  const auto H = static_cast<std::size_t>(model_.config().hidden_size);
  drafter_.after_verify(p, k, std::span<const float>(out_.hidden).first(static_cast<std::size_t>(keep) * H), emitted);
  next_ = emitted.back();

  const double t2 = now_s();
  drafter_.stats().mtp_s += t1 - t0;
  drafter_.stats().verify_s += t2 - t1;
  drafter_.record(k, keep, stopped, t2 - t0 - catch_up_s);
  return emitted;
}

}  // namespace qwenrt
