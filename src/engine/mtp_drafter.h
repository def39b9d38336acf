#pragma once
// The pieces of MTP speculative decoding that do not depend on who runs the verify step: one
// sequence's MTP side (the rows its block has still to see, drafting k tokens, its cache cut back
// after a verify), accepting the longest agreeing prefix of a verified window, and cutting the
// main cache back to it. MtpSpeculator (run, chat, generate, bench) verifies one sequence per step;
// the Scheduler (serve) verifies every running sequence's window in one step. Both use these, so
// there is one copy of the rollback.
//
// MTP rows: the block reads pairs (h_t, x_{t+1}) of the main model's final hidden row at position t
// and the token after it. Row j of its cache is the pair of main position first_position + j
// (RoPE sees only relative positions, so a drafter may start past the prompt's beginning: the
// server's sequences resumed from the prefix cache have no hidden rows for the cached part).
#include <algorithm>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "core/thread_pool.h"
#include "engine/draft_length.h"
#include "model/qwen35_model.h"

namespace qwenrt {

struct SpeculationOptions {
  int max_draft_tokens = 3;  // --draft-tokens K
  bool adaptive = true;      // false: always draft max_draft_tokens (tests, measurements)
  // bench --synthetic --accept-rate P (MtpSpeculator only): each draft is accepted with probability
  // P whatever the model says (its row's logits are made to agree, or not, before the pick), so
  // random weights exercise the mechanics at a chosen acceptance. The tokens are then not the
  // model's. < 0: off.
  double forced_accept_rate = -1;
};

struct SpeculationStats {
  int64_t steps = 0;   // main-model steps after the prefill (verify or plain decode)
  int64_t tokens = 0;  // tokens those steps produced (accepted drafts + each step's own)
  int64_t drafted = 0, accepted = 0;
  std::vector<int64_t> drafted_at, accepted_at;  // per draft position 1..K (index 0 unused)
  double mtp_s = 0, verify_s = 0;                // time drafting and in the main model's steps
};

// The caller's decision on one verified row: the token the model emits there (its argmax, or
// its sampler's draw over the row's logits), and whether generation ends after it.
struct RowPick {
  int32_t token;
  bool stop = false;
};

// Rows 0 .. k of a verify window of [pending, d1 .. dk], in order: pick(i) emits row i's token
// (appended to `emitted`). Drafts are kept while they equal the picks; the first pick that differs,
// the pick after the last draft, or a pick that stops ends the window (no pick is asked for past
// it). Returns the rows that stay in the cache (1 .. k + 1).
int accept_drafts(std::span<const int32_t> drafts, const std::function<RowPick(int row)>& pick, std::vector<int32_t>& emitted, bool& stopped);

// After a verify step that put k + 1 rows into `slot` from position `start` (armed with
// ModelCache::keep_row_states when k > 0): the slot ends after the `keep` accepted rows, its
// DeltaNet state the one kept after the last of them; bit for bit a slot fed only those rows.
void keep_verified_rows(ModelCache& cache, int slot, int64_t start, int k, int keep);

class MtpDrafter {
 public:
  // `mtp_slot` of `mtp_cache` (made by model.new_mtp_cache) is fresh; its row 0 will be the pair of
  // main position `first_position`. Error when the model has no MTP block or runs on a device.
  MtpDrafter(const Qwen35Model& model, ModelCache& mtp_cache, int mtp_slot, int64_t first_position, const SpeculationOptions& options);
  // A copy for another choice of the same prompt (n > 1): the same MTP rows (forked into `mtp_slot`,
  // fresh) and pending rows; its own statistics from here on.
  MtpDrafter(const MtpDrafter& from, int mtp_slot);
  MtpDrafter(const MtpDrafter&) = delete;
  MtpDrafter& operator=(const MtpDrafter&) = delete;

  // The main model's hidden rows [r, H] for the next positions, then the tokens after them (at most
  // one token per row given; the last row of a prompt waits for the first generated token).
  void add_hidden(std::span<const float> rows);
  void add_tokens(std::span<const int32_t> tokens);
  // Feeds the MTP block the pending rows whose tokens are known, in steps of at most `chunk` rows
  // (prompt windows, so the rows do not pile up).
  void flush(int64_t chunk, ThreadPool& pool);

  // How many tokens to draft now (DraftLength's choice), at most `room` (>= 0).
  int choose(int64_t room) { return static_cast<int>(std::clamp<int64_t>(draft_length_.choose(), 0, std::max<int64_t>(room, 0))); }
  // Catches the MTP block up on the pending rows (every one with its token; the last is the pending
  // token after the hidden row before it) and drafts k >= 1 tokens, each further draft feeding back
  // the block's own hidden row (greedy drafts). `catch_up_s`: the time of pending rows beyond one.
  std::vector<int32_t> draft(int k, ThreadPool& pool, double& catch_up_s);
  // The same for several sequences' drafters (one model, one MTP cache) at once: one MTP step for
  // every catch-up, then one step per further draft over the drafters that want it (drafters[i]
  // drafts ks[i] >= 1 tokens). Each drafter's drafts are those draft() gives it alone: the MTP
  // rows do not depend on the batch. `catch_up_s[i]`: drafter i's share of the catch-up time.
  static std::vector<std::vector<int32_t>> draft_together(const std::vector<MtpDrafter*>& drafters, const std::vector<int>& ks, ThreadPool& pool,
                                                         std::vector<double>& catch_up_s);
  // After the verify window [pending, d1 .. dk] that started at main position `start`: the drafts'
  // MTP rows go, and the kept rows' hidden rows [keep, H] and the tokens emitted there are pending.
  void after_verify(int64_t start, int k, std::span<const float> kept_hidden, std::span<const int32_t> emitted);
  // While a sequence does not draft (the server above its threshold) its rows wait here; past
  // `max_rows` the block starts over from the last one (it loses the older rows' context; memory
  // and time stay bounded, and the tokens never depend on it).
  void bound_pending(std::size_t max_rows);
  // Statistics of that window, and its time for the choice of k (not when the sequence stopped:
  // a cut-short window says nothing about speed).
  void record(int k, int keep, bool stopped, double seconds);

  const SpeculationStats& stats() const { return stats_; }
  SpeculationStats& stats() { return stats_; }
  const DraftLength& draft_length() const { return draft_length_; }

 private:
  const Qwen35Model& model_;
  ModelCache& mtp_cache_;
  int mtp_slot_;
  int64_t first_position_;
  DraftLength draft_length_;
  SpeculationStats stats_;
  int64_t H_;
  // Rows not yet fed to the block: main hidden rows h_t and tokens x_{t+1}, t from the MTP cache's
  // end on; the tokens are as many as the rows or one fewer.
  std::vector<float> pending_hidden_;
  std::vector<int32_t> pending_tokens_;
  StepOutput out_;
};

}  // namespace qwenrt
