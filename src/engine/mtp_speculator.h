#pragma once
// Speculative decoding of one sequence with the checkpoint's MTP block, in rounds a scheduler can
// call per sequence:
//   1. draft: the MTP block catches up on the rows the main model verified since the last round
//      (pairs of the main model's hidden row at t and the token t+1) and drafts k tokens, each
//      further draft feeding back the MTP's own hidden row (greedy drafts: the MTP's argmax);
//   2. verify: the main model runs [pending token, d1 .. dk] in one committed step (each row
//      computed bit for bit as a lone decode row would be), logits and hidden rows for every row;
//   3. accept: the caller picks the model's own token for each row in order (greedy or its
//      sampler); drafts are kept while they equal those picks, and the first pick that differs
//      (or the pick after the last draft) is the round's own token. The cache is cut back to the
//      accepted rows: attention rows dropped, DeltaNet conv and recurrent state restored from the
//      state kept after the last accepted row (ModelCache::keep_row_states / truncate).
// The MTP side and the rollback are engine/mtp_drafter's, which the server's scheduler shares.
// The tokens and logits are therefore exactly those of plain decoding, whatever k and whatever
// the drafts; only the number of main-model steps changes. k adapts (engine/draft_length).
#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "engine/mtp_drafter.h"
#include "model/qwen35_model.h"

namespace qwenrt {

// Called for rows 0, 1, ... of a round in order, each call emitting its token; no call is made
// for rows past the first disagreement or stop.
using PickFn = std::function<RowPick(std::span<const float> logits)>;

class MtpSpeculator {
 public:
  // One sequence: `slot` of `cache` (fresh) and `mtp_slot` of `mtp_cache` (made by
  // model.new_mtp_cache, fresh). Error when the model has no MTP block or runs on a device.
  MtpSpeculator(const Qwen35Model& model, ModelCache& cache, int slot, ModelCache& mtp_cache, int mtp_slot, const SpeculationOptions& options,
                ThreadPool& pool);

  // Prefills `prompt` in windows of `chunk` tokens, and the MTP block over the prompt's rows;
  // returns the last row's logits, from which the caller picks the first token for start().
  std::span<const float> prefill(const std::vector<int32_t>& prompt, int64_t chunk);
  void start(int32_t first_token);

  // One round: feeds the pending token (and drafts), emits 1 .. k+1 tokens through `pick`,
  // at most `max_tokens` (>= 1). The last emitted token is the next round's pending token (not yet
  // in the cache). Returns the emitted tokens; `stopped` when a pick asked to stop.
  std::vector<int32_t> round(int64_t max_tokens, const PickFn& pick, bool& stopped);

  const SpeculationStats& stats() const { return drafter_.stats(); }
  const DraftLength& draft_length() const { return drafter_.draft_length(); }

 private:
  const Qwen35Model& model_;
  ModelCache& cache_;
  int slot_;
  ThreadPool& pool_;
  MtpDrafter drafter_;  // the MTP side, its rollback and the choice of k (shared with the server)
  int32_t next_ = -1;   // the pending token: emitted, not yet in the cache
  StepOutput out_;
  double forced_accept_rate_;     // SpeculationOptions::forced_accept_rate
  std::mt19937_64 forced_coin_{7};  // its draws, seeded: runs repeat
};

}  // namespace qwenrt
