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
  std::vector<double> share;
  std::vector<std::vector<int32_t>> drafts = draft_together({this}, {k}, pool, share);
  catch_up_s = share[0];
  return std::move(drafts[0]);
}

std::vector<std::vector<int32_t>> MtpDrafter::draft_together(const std::vector<MtpDrafter*>& drafters, const std::vector<int>& ks, ThreadPool& pool,
                                                            std::vector<double>& catch_up_s) {
  if (drafters.size() != ks.size()) fail("internal: one draft count per drafter");
  std::vector<std::vector<int32_t>> drafts(drafters.size());
  catch_up_s.assign(drafters.size(), 0.0);
  if (drafters.empty()) return drafts;
  const Qwen35Model& model = drafters[0]->model_;
  ModelCache& cache = drafters[0]->mtp_cache_;
  const auto V = static_cast<std::size_t>(model.config().vocab_size);
  const auto H = static_cast<std::size_t>(drafters[0]->H_);
  // Catch-up: each drafter's rows verified since its last draft, the last of which (its pending
  // token with the hidden row before it) yields its first draft. Rows of several sequences, some
  // several rows long: a committed step (each row as a lone decode row computes it).
  Step step{Phase::Decode, {}, false, true};
  std::size_t rows = 0;
  for (std::size_t i = 0; i < drafters.size(); ++i) {
    MtpDrafter& d = *drafters[i];
    if (&d.model_ != &model || &d.mtp_cache_ != &cache) fail("internal: drafters drafting together share a model and an MTP cache");
    if (ks[i] < 1) fail("internal: a draft has at least one token");
    if (d.pending_tokens_.empty() || d.pending_tokens_.size() * H != d.pending_hidden_.size())
      fail("internal: drafting needs the pending token after the last hidden row");
    if (d.pending_tokens_.size() > 1) step.phase = Phase::Committed;
    rows += d.pending_tokens_.size();
    step.sequences.push_back({d.mtp_slot_, std::move(d.pending_tokens_)});
    step.sequences.back().hidden_in = std::move(d.pending_hidden_);
    d.pending_tokens_.clear();
    d.pending_hidden_.clear();
  }
  StepOutput& out = drafters[0]->out_;
  const double t0 = now_s();
  model.mtp_forward(step, cache, pool, out);
  // The rows beyond each sequence's last are its rounds without drafts catching up: their time is theirs.
  const double per_row = (now_s() - t0) / static_cast<double>(rows);
  std::vector<std::size_t> at(drafters.size());  // each drafter's row in the last step's output
  for (std::size_t i = 0; i < drafters.size(); ++i) {
    catch_up_s[i] = per_row * static_cast<double>(step.sequences[i].tokens.size() - 1);
    at[i] = i;
    drafts[i].push_back(argmax_row(out.logits.data() + i * V, static_cast<int64_t>(V)));
  }
  // Further drafts, one row per drafter that wants more, each feeding back its own hidden row.
  for (int j = 1;; ++j) {
    Step next{Phase::Decode, {}, false, true};
    std::vector<std::size_t> who;
    for (std::size_t i = 0; i < drafters.size(); ++i) {
      if (ks[i] <= j) continue;
      next.sequences.push_back({drafters[i]->mtp_slot_, {drafts[i].back()}});
      next.sequences.back().hidden_in.assign(out.hidden.begin() + static_cast<long>(at[i] * H), out.hidden.begin() + static_cast<long>((at[i] + 1) * H));
      who.push_back(i);
    }
    if (who.empty()) break;
    model.mtp_forward(next, cache, pool, out);
    for (std::size_t r = 0; r < who.size(); ++r) {
      at[who[r]] = r;
      drafts[who[r]].push_back(argmax_row(out.logits.data() + r * V, static_cast<int64_t>(V)));
    }
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
