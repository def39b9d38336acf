#include "engine/mtp_speculator.h"

#include <algorithm>
#include <chrono>

#include "core/error.h"

namespace qwenrt {

namespace {
double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
}  // namespace

MtpSpeculator::MtpSpeculator(const Qwen35Model& model, ModelCache& cache, int slot, ModelCache& mtp_cache, int mtp_slot,
                             const SpeculationOptions& options, ThreadPool& pool)
    : model_(model),
      cache_(cache),
      mtp_cache_(mtp_cache),
      slot_(slot),
      mtp_slot_(mtp_slot),
      pool_(pool),
      draft_length_(options.max_draft_tokens, options.adaptive),
      H_(model.config().hidden_size) {
  if (!model.has_mtp()) fail("--speculative mtp: this checkpoint has no MTP block (no mtp.* tensors)");
  if (model.device().kind != DeviceSpec::Kind::Cpu)
    fail("--speculative mtp runs on the CPU only for now: the CUDA backend has no MTP ops and no cache rollback yet (use --device cpu)");
  if (cache.length(slot) != 0 || mtp_cache.length(mtp_slot) != 0) fail("internal: speculation starts from fresh cache slots");
  stats_.drafted_at.assign(static_cast<std::size_t>(options.max_draft_tokens) + 1, 0);
  stats_.accepted_at.assign(static_cast<std::size_t>(options.max_draft_tokens) + 1, 0);
}

std::span<const float> MtpSpeculator::prefill(const std::vector<int32_t>& prompt, int64_t chunk) {
  if (prompt.empty()) fail("the prompt is empty");
  if (chunk < 1) fail("prefill chunk must be at least 1");
  // Every row's hidden state is kept for the MTP block's own prefill (it attends over all rows).
  for (std::size_t b = 0; b < prompt.size(); b += static_cast<std::size_t>(chunk)) {
    const std::size_t e = std::min(prompt.size(), b + static_cast<std::size_t>(chunk));
    Step step{Phase::Window, {{slot_, {prompt.begin() + static_cast<long>(b), prompt.begin() + static_cast<long>(e)}}}, true, true};
    model_.forward(step, cache_, pool_, out_);
    pending_hidden_.insert(pending_hidden_.end(), out_.hidden.begin(), out_.hidden.end());
  }
  const auto V = static_cast<std::size_t>(model_.config().vocab_size);
  const std::span<const float> last{out_.logits.data() + out_.logits.size() - V, V};
  // The MTP block's own prefill: rows (h_t, x_{t+1}) for t < n − 1, in windows of `chunk`. Row
  // n − 1 waits for the first generated token.
  const auto H = static_cast<std::size_t>(H_);
  for (std::size_t b = 0; b + 1 < prompt.size(); b += static_cast<std::size_t>(chunk)) {
    const std::size_t e = std::min(prompt.size() - 1, b + static_cast<std::size_t>(chunk));
    Step step{Phase::Committed, {{mtp_slot_, {prompt.begin() + static_cast<long>(b + 1), prompt.begin() + static_cast<long>(e + 1)}}}, false, false};
    step.sequences[0].hidden_in.assign(pending_hidden_.begin() + static_cast<long>(b * H), pending_hidden_.begin() + static_cast<long>(e * H));
    model_.mtp_forward(step, mtp_cache_, pool_, mtp_out_);
  }
  pending_hidden_.erase(pending_hidden_.begin(), pending_hidden_.end() - static_cast<long>(H));
  pending_tokens_.clear();
  return last;
}

void MtpSpeculator::start(int32_t first_token) {
  if (pending_tokens_.size() + 1 != pending_hidden_.size() / static_cast<std::size_t>(H_)) fail("internal: start() comes once, after prefill()");
  next_ = first_token;
  pending_tokens_.push_back(first_token);
}

std::vector<int32_t> MtpSpeculator::draft(int k, double& catch_up_s) {
  std::vector<int32_t> drafts;
  const auto V = static_cast<std::size_t>(model_.config().vocab_size);
  const auto H = static_cast<std::size_t>(H_);
  // Catch-up: the rows verified since the last round, the last of which (the pending token with
  // the hidden row before it) yields the first draft.
  Step step{pending_tokens_.size() == 1 ? Phase::Decode : Phase::Committed, {{mtp_slot_, pending_tokens_}}, false, true};
  step.sequences[0].hidden_in = std::move(pending_hidden_);
  const std::size_t catch_up_rows = pending_tokens_.size();
  for (bool first = true;; first = false) {
    const double t0 = now_s();
    model_.mtp_forward(step, mtp_cache_, pool_, mtp_out_);
    // The rows beyond the first are the rounds without drafts catching up: their time is theirs.
    if (first) catch_up_s = (now_s() - t0) * static_cast<double>(catch_up_rows - 1) / static_cast<double>(catch_up_rows);
    drafts.push_back(argmax_row(mtp_out_.logits.data(), static_cast<int64_t>(V)));
    if (static_cast<int>(drafts.size()) == k) break;
    step.phase = Phase::Decode;
    step.sequences[0].tokens = {drafts.back()};
    step.sequences[0].hidden_in.assign(mtp_out_.hidden.end() - static_cast<long>(H), mtp_out_.hidden.end());
  }
  pending_hidden_.clear();
  pending_tokens_.clear();
  return drafts;
}

std::vector<int32_t> MtpSpeculator::round(int64_t max_tokens, const PickFn& pick, bool& stopped) {
  if (next_ < 0) fail("internal: round() before start()");
  if (max_tokens < 1) fail("internal: a round emits at least one token");
  const double t0 = now_s();
  const int64_t p = cache_.length(slot_);
  const int64_t limit = model_.config().max_position_embeddings;
  int64_t room = max_tokens - 1;  // drafts beyond the tokens still wanted are never emitted
  if (limit > 0) room = std::min(room, limit - p - 1);
  const int k = static_cast<int>(std::clamp<int64_t>(draft_length_.choose(), 0, std::max<int64_t>(room, 0)));

  std::vector<int32_t> drafts;
  double catch_up_s = 0;
  if (k > 0) drafts = draft(k, catch_up_s);
  const double t1 = now_s();

  // Verify [pending, d1 .. dk] in one step, each row as a lone decode row computes it.
  Step verify{k == 0 ? Phase::Decode : Phase::Committed, {{slot_, {next_}}}, true, true};
  verify.sequences[0].tokens.insert(verify.sequences[0].tokens.end(), drafts.begin(), drafts.end());
  if (k > 0) cache_.keep_row_states(slot_, k + 1);
  model_.forward(verify, cache_, pool_, out_);

  const auto V = static_cast<std::size_t>(model_.config().vocab_size);
  std::vector<int32_t> emitted;
  stopped = false;
  int keep = 0;  // rows of the window that stay in the cache
  for (int i = 0; i <= k; ++i) {
    const RowPick r = pick({out_.logits.data() + static_cast<std::size_t>(i) * V, V});
    emitted.push_back(r.token);
    keep = i + 1;
    if (r.stop) {
      stopped = true;
      break;
    }
    if (i == k || r.token != drafts[static_cast<std::size_t>(i)]) break;
  }
  const int accepted = keep - 1;                                     // drafts d1 .. d_{keep-1} matched the picks
  const int tried = stopped ? accepted : std::min(k, accepted + 1);  // drafts compared with a pick
  if (keep < k + 1) cache_.truncate(slot_, p + keep);
  else cache_.drop_row_states(slot_);
  if (k > 0) mtp_cache_.truncate(mtp_slot_, p);  // the drafts' own rows go; verified rows come next round

  // The MTP block's next rows: (h_{p+i}, token emitted at row i) for the kept rows.
  const auto H = static_cast<std::size_t>(H_);
  pending_hidden_.insert(pending_hidden_.end(), out_.hidden.begin(), out_.hidden.begin() + static_cast<long>(keep * H));
  pending_tokens_.insert(pending_tokens_.end(), emitted.begin(), emitted.end());
  next_ = emitted.back();

  ++stats_.steps;
  stats_.tokens += static_cast<int64_t>(emitted.size());
  stats_.drafted += k;
  stats_.accepted += accepted;
  for (int i = 1; i <= tried; ++i) ++stats_.drafted_at[static_cast<std::size_t>(i)];
  for (int i = 1; i <= accepted; ++i) ++stats_.accepted_at[static_cast<std::size_t>(i)];
  const double t2 = now_s();
  stats_.mtp_s += t1 - t0;
  stats_.verify_s += t2 - t1;
  if (!stopped) draft_length_.record(k, accepted, t2 - t0 - catch_up_s);
  return emitted;
}

}  // namespace qwenrt
