#include "engine/mtp_drafter.h"

#include <chrono>

#include "core/error.h"

namespace qwenrt {

namespace {
double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
}  // namespace

int accept_drafts(std::span<const int32_t> drafts, const std::function<RowPick(int row)>& pick, std::vector<int32_t>& emitted, bool& stopped) {
  const int k = static_cast<int>(drafts.size());
  stopped = false;
  for (int i = 0;; ++i) {
    const RowPick r = pick(i);
    emitted.push_back(r.token);
    if (r.stop) {
      stopped = true;
      return i + 1;
    }
    if (i == k || r.token != drafts[static_cast<std::size_t>(i)]) return i + 1;
  }
}

void keep_verified_rows(ModelCache& cache, int slot, int64_t start, int k, int keep) {
  if (keep < 1 || keep > k + 1) fail("internal: a verify window of ", k + 1, " rows keeps ", keep);
  if (keep < k + 1) cache.truncate(slot, start + keep);
  else if (k > 0) cache.drop_row_states(slot);
}

MtpDrafter::MtpDrafter(const Qwen35Model& model, ModelCache& mtp_cache, int mtp_slot, int64_t first_position, const SpeculationOptions& options)
    : model_(model),
      mtp_cache_(mtp_cache),
      mtp_slot_(mtp_slot),
      first_position_(first_position),
      draft_length_(options.max_draft_tokens, options.adaptive),
      H_(model.config().hidden_size) {
  if (!model.has_mtp()) fail("--speculative mtp: this checkpoint has no MTP block (no mtp.* tensors)");
  if (mtp_cache.length(mtp_slot) != 0) fail("internal: a drafter starts from a fresh MTP cache slot");
  stats_.drafted_at.assign(static_cast<std::size_t>(options.max_draft_tokens) + 1, 0);
  stats_.accepted_at.assign(static_cast<std::size_t>(options.max_draft_tokens) + 1, 0);
}

MtpDrafter::MtpDrafter(const MtpDrafter& from, int mtp_slot)
    : model_(from.model_),
      mtp_cache_(from.mtp_cache_),
      mtp_slot_(mtp_slot),
      first_position_(from.first_position_),
      draft_length_(from.draft_length_),
      H_(from.H_),
      pending_hidden_(from.pending_hidden_),
      pending_tokens_(from.pending_tokens_) {
  mtp_cache_.fork(from.mtp_slot_, mtp_slot);
  stats_.drafted_at.assign(from.stats_.drafted_at.size(), 0);
  stats_.accepted_at.assign(from.stats_.accepted_at.size(), 0);
}

void MtpDrafter::add_hidden(std::span<const float> rows) {
  if (rows.size() % static_cast<std::size_t>(H_) != 0) fail("internal: hidden rows of ", rows.size(), " values are not rows of ", H_);
  pending_hidden_.insert(pending_hidden_.end(), rows.begin(), rows.end());
}

void MtpDrafter::add_tokens(std::span<const int32_t> tokens) {
  pending_tokens_.insert(pending_tokens_.end(), tokens.begin(), tokens.end());
  if (pending_tokens_.size() > pending_hidden_.size() / static_cast<std::size_t>(H_)) fail("internal: MTP tokens without their hidden rows");
}

void MtpDrafter::flush(int64_t chunk, ThreadPool& pool) {
  if (chunk < 1) fail("internal: MTP flush chunk must be at least 1");
  const auto H = static_cast<std::size_t>(H_);
  const std::size_t n = pending_tokens_.size();
  for (std::size_t b = 0; b < n; b += static_cast<std::size_t>(chunk)) {
    const std::size_t e = std::min(n, b + static_cast<std::size_t>(chunk));
    Step step{e - b == 1 ? Phase::Decode : Phase::Committed,
              {{mtp_slot_, {pending_tokens_.begin() + static_cast<long>(b), pending_tokens_.begin() + static_cast<long>(e)}}},
              false,
              false};
    step.sequences[0].hidden_in.assign(pending_hidden_.begin() + static_cast<long>(b * H), pending_hidden_.begin() + static_cast<long>(e * H));
    model_.mtp_forward(step, mtp_cache_, pool, out_);
  }
  pending_hidden_.erase(pending_hidden_.begin(), pending_hidden_.begin() + static_cast<long>(n * H));
  pending_tokens_.clear();
}

std::vector<int32_t> MtpDrafter::draft(int k, ThreadPool& pool, double& catch_up_s) {
  const auto V = static_cast<std::size_t>(model_.config().vocab_size);
  const auto H = static_cast<std::size_t>(H_);
  if (k < 1) fail("internal: a draft has at least one token");
  if (pending_tokens_.empty() || pending_tokens_.size() * H != pending_hidden_.size())
    fail("internal: drafting needs the pending token after the last hidden row");
  std::vector<int32_t> drafts;
  // Catch-up: the rows verified since the last draft, the last of which (the pending token with
  // the hidden row before it) yields the first draft.
  Step step{pending_tokens_.size() == 1 ? Phase::Decode : Phase::Committed, {{mtp_slot_, pending_tokens_}}, false, true};
  step.sequences[0].hidden_in = std::move(pending_hidden_);
  const std::size_t catch_up_rows = pending_tokens_.size();
  pending_hidden_.clear();
  pending_tokens_.clear();
  for (bool first = true;; first = false) {
    const double t0 = now_s();
    model_.mtp_forward(step, mtp_cache_, pool, out_);
    // The rows beyond the first are the rounds without drafts catching up: their time is theirs.
    if (first) catch_up_s = (now_s() - t0) * static_cast<double>(catch_up_rows - 1) / static_cast<double>(catch_up_rows);
    drafts.push_back(argmax_row(out_.logits.data(), static_cast<int64_t>(V)));
    if (static_cast<int>(drafts.size()) == k) break;
    step.phase = Phase::Decode;
    step.sequences[0].tokens = {drafts.back()};
    step.sequences[0].hidden_in.assign(out_.hidden.end() - static_cast<long>(H), out_.hidden.end());
  }
  return drafts;
}

void MtpDrafter::after_verify(int64_t start, int k, std::span<const float> kept_hidden, std::span<const int32_t> emitted) {
  if (kept_hidden.size() != emitted.size() * static_cast<std::size_t>(H_)) fail("internal: one hidden row per emitted token");
  // The drafts' own rows go; the verified rows come with the next draft's catch-up.
  if (k > 0) mtp_cache_.truncate(mtp_slot_, start - first_position_);
  add_hidden(kept_hidden);
  add_tokens(emitted);
}

void MtpDrafter::bound_pending(std::size_t max_rows) {
  const std::size_t n = pending_tokens_.size();
  if (n <= std::max<std::size_t>(max_rows, 1) || n * static_cast<std::size_t>(H_) != pending_hidden_.size()) return;
  first_position_ += mtp_cache_.length(mtp_slot_) + static_cast<int64_t>(n) - 1;
  mtp_cache_.truncate(mtp_slot_, 0);
  pending_hidden_.erase(pending_hidden_.begin(), pending_hidden_.end() - H_);
  pending_tokens_.erase(pending_tokens_.begin(), pending_tokens_.end() - 1);
}

void MtpDrafter::record(int k, int keep, bool stopped, double seconds) {
  const int accepted = keep - 1;                                     // drafts d1 .. d_{keep-1} matched the picks
  const int tried = stopped ? accepted : std::min(k, accepted + 1);  // drafts compared with a pick
  ++stats_.steps;
  stats_.tokens += keep;
  stats_.drafted += k;
  stats_.accepted += accepted;
  for (int i = 1; i <= tried; ++i) ++stats_.drafted_at[static_cast<std::size_t>(i)];
  for (int i = 1; i <= accepted; ++i) ++stats_.accepted_at[static_cast<std::size_t>(i)];
  if (!stopped) draft_length_.record(k, accepted, seconds);
}

}  // namespace qwenrt
