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
// The tokens and logits are therefore exactly those of plain decoding, whatever k and whatever
// the drafts; only the number of main-model steps changes. k adapts (engine/draft_length).
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "engine/draft_length.h"
#include "model/qwen35_model.h"

namespace qwenrt {

struct SpeculationOptions {
  int max_draft_tokens = 3;  // --draft-tokens K
  bool adaptive = true;      // false: always draft max_draft_tokens (tests, measurements)
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

  const SpeculationStats& stats() const { return stats_; }
  const DraftLength& draft_length() const { return draft_length_; }

 private:
  // Drafts k tokens with the MTP block from the pending rows; returns them. `catch_up_s`: the
  // time spent on pending rows beyond one (left by rounds that drafted nothing).
  std::vector<int32_t> draft(int k, double& catch_up_s);

  const Qwen35Model& model_;
  ModelCache& cache_;
  ModelCache& mtp_cache_;
  int slot_, mtp_slot_;
  ThreadPool& pool_;
  DraftLength draft_length_;
  SpeculationStats stats_;
  int64_t H_;
  // MTP rows not yet fed to its block: main hidden rows h_t and tokens x_{t+1}, for t from the MTP
  // cache's length on (between prefill and start the last row's token is not known yet).
  std::vector<float> pending_hidden_;
  std::vector<int32_t> pending_tokens_;
  int32_t next_ = -1;  // the pending token: emitted, not yet in the cache
  StepOutput out_, mtp_out_;
};

}  // namespace qwenrt
