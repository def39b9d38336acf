#pragma once
// Continuous batching: one thread owns the model and its cache and serves every request.
//
// Requests are submitted from any thread and come back as a RequestHandle, a stream of events
// (text, reasoning and tool-call deltas with their logprobs, then one finish with usage per choice)
// that can be cancelled. Each iteration of the scheduler loop:
//   (a) admits waiting requests, in arrival order, while the pools have room (admit): n state slots
//       (one per choice) and the KV blocks of prompt + max_tokens for each choice, less the blocks
//       of the longest cached prefix the request resumes from (prefix cache); least recently used
//       prefix-cache entries are evicted for blocks. What does not fit waits.
//   (b) runs ONE decode step (Phase::Decode): one row for every running sequence whose prompt is in
//       (when every row is plain greedy, only the argmax of each row comes back: picked on the GPU),
//   (c) runs at most ONE window step (Phase::Window): prompt chunks of prefilling sequences under a
//       token budget, so a long prompt never stalls the other streams (chunked prefill).
//   With mixed_steps (the GPU's default in `serve`), (b) and (c) are one window step while both
//   kinds of rows are there: each decode row a one-token span ahead of the prompt chunks.
// plan_decode / plan_window are the one place that decides what each step computes.
//
// Batch invariance (the CPU): decode rows and prompt rows never share a step, and prompt chunks
// end at multiples of prefill_chunk or at snapshot points, and start at multiples of the snapshot
// alignment (align(): the DeltaNet window chunk, or prefill_chunk), so a sequence's logits are
// bitwise the same whatever else runs and whether its prompt resumed from the prefix cache.
// After a window step, a sequence at a snapshot point (every snapshot_interval tokens, and the
// prompt's last aligned position) leaves a snapshot in the prefix cache.
//
// A request with n > 1 prefills once; at the prompt's end its slot is forked into n − 1 more
// (KV shared, state copied), each choice sampling with its own stream (seed + choice).
// MTP speculation (SchedulerOptions::speculative, CPU): while at most speculate_max_seqs sequences
// decode, each drafts k tokens with the checkpoint's MTP block (k per sequence, adapted to its own
// acceptance by engine/DraftLength) and the decode step becomes a committed step of every
// sequence's window [its token, d1 .. dk] (each row computed bit for bit as a lone decode row);
// each sequence keeps its longest agreeing prefix plus the model's own next token, and its cache is
// cut back there (engine/mtp_drafter, shared with run / generate). Tokens and logprobs are those of
// plain decoding: each emitted token is still sampled from its row in order, and stop ids, stop
// strings and max_tokens end a window early. Above the threshold steps are plain decode steps.
// Prompt windows then return every row's hidden state for the MTP block (and every row's logits).
//
// A step that throws fails its sequences (FinishReason::Error, the message to each client) and
// the loop goes on. A cancelled request leaves (its slot released) at the next iteration.
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "cache/prefix_cache.h"
#include "core/thread_pool.h"
#include "engine/latency_histogram.h"
#include "engine/mtp_drafter.h"
#include "engine/sampler.h"
#include "engine/text_output.h"
#include "model/qwen35_model.h"
#include "text/tokenizer/tokenizer.h"

namespace qwenrt {

struct GenerationRequest {
  std::vector<int32_t> prompt;
  SamplingParams sampling;  // logprobs / top_logprobs: each token's logprobs come with its event
  int64_t max_tokens = 256;
  int n = 1;                      // choices, each sampling with seed + its index
  bool ignore_eos = false;        // the model's stop ids do not end generation (fixed-length benchmarks)
  std::vector<int32_t> stop_ids;  // more ids that end generation
  TextOutputOptions output;
  // Sees each raw logits row this request samples from (choice, row) before sampling (tests).
  std::function<void(int, std::span<const float>)> on_logits;
};

enum class FinishReason { Stop, Length, StopString, ToolCalls, Cancelled, Error };
const char* finish_reason_name(FinishReason reason);  // "stop", "length", ...

struct TokenLogprob {
  struct Alternative {
    int32_t id;
    std::string bytes;  // the token's text as bytes (may be part of a UTF-8 character)
    float logprob;
  };
  int32_t id;
  std::string bytes;
  float logprob;                 // under the model's raw distribution
  std::vector<Alternative> top;  // top_logprobs best, best first
};

struct GenerationEvent {
  int choice = 0;
  OutputDelta delta;
  std::vector<TokenLogprob> logprobs;  // the tokens sampled since the choice's last event (when asked)
  bool finished = false;               // the choice's last event
  bool last = false;                   // the request's last event (every choice finished)
  FinishReason finish = FinishReason::Stop;
  std::string stop_string;  // FinishReason::StopString: which one
  std::string error;        // FinishReason::Error
  // On every event: the prompt's tokens and how many of them came from the prefix cache; on a
  // choice's last event, its completion tokens.
  int64_t prompt_tokens = 0, cached_tokens = 0, completion_tokens = 0;
};

class RequestHandle {
 public:
  // Moves the events that arrived into `out`, waiting up to `timeout` for the first one. Returns
  // false once the request's last event has been handed out (nothing more will come).
  bool wait(std::vector<GenerationEvent>& out, std::chrono::milliseconds timeout);
  // The request ends (FinishReason::Cancelled) and frees its slots at the next iteration.
  void cancel() { cancelled_ = true; }
  bool cancelled() const { return cancelled_; }

 private:
  friend class Scheduler;
  void push(GenerationEvent&& event);

  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<GenerationEvent> events_;
  int open_choices_ = 1;   // choices not yet finished
  bool finished_ = false;  // the last event was pushed
  bool drained_ = false;   // and handed out
  std::atomic<bool> cancelled_{false};
};

struct SchedulerOptions {
  int max_seqs = 8;                    // state slots: sequences (choices) that run at once
  int64_t ctx_size = 8192;             // prompt + max_tokens of one request
  int max_queue = 64;                  // requests waiting for room
  int64_t prefill_chunk = 512;         // prompt chunks end at multiples of this
  int64_t window_budget = 512;         // prompt rows of one window step (at least one chunk runs)
  int64_t kv_blocks = 0;               // KV pool in blocks of Qwen35Model::kCacheBlockSize; 0: max_seqs full contexts
  std::size_t prefix_cache_bytes = 0;  // prefix-cache cap (snapshots + the KV blocks they hold); 0: off
  int64_t snapshot_interval = 2048;    // snapshots every this many prompt tokens (rounded to align())
  // While prompts are being prefilled, the decode rows ride in the window step (one pass over the
  // weights for both) instead of a decode step of their own. Off: decode rows and prompt rows never
  // share a step, which the CPU's bitwise batch invariance needs (see above).
  bool mixed_steps = false;
  // MTP speculative decoding (serve --speculative mtp): the model needs an MTP block.
  bool speculative = false;
  SpeculationOptions speculation;
  int speculate_max_seqs = 1;  // drafts only while at most this many sequences decode
  // Called before each forward with the step about to run; what it throws fails the step (tests).
  std::function<void(const Step&)> before_step;
};

// Why submit refused a request.
class SubmitError : public std::runtime_error {
 public:
  enum class Kind { Invalid, TooLong, QueueFull, Closed };
  SubmitError(Kind kind, const std::string& message) : std::runtime_error(message), kind(kind) {}
  Kind kind;
};

struct SchedulerStats {
  int waiting = 0, running = 0, free_slots = 0;  // running: sequences (choices) in slots
  int64_t requests = 0, prompt_tokens = 0, generated_tokens = 0, steps = 0;
  int64_t prefill_tokens = 0;  // prompt tokens computed (admitted prompt tokens less cached ones)
  int64_t cached_tokens = 0;   // prompt tokens resumed from the prefix cache
  int64_t failed_steps = 0;
  std::array<int64_t, 6> finished{};  // requests (choices) by FinishReason
  int64_t kv_blocks = 0, kv_blocks_used = 0;
  std::size_t kv_bytes_per_block = 0, state_bytes_per_slot = 0;
  PrefixCacheStats prefix;
  // Speculation: draft tokens verified, those accepted, and sequence steps that verified drafts.
  int64_t spec_drafted = 0, spec_accepted = 0, spec_rounds = 0;
  LatencyHistogram time_to_first_token, inter_token_latency;
  // Where the loop's time goes: model steps by kind (decode: decode and verify steps; window:
  // prompt chunks), each timed from its start to its results on the host; prefix-cache snapshots;
  // and every loop iteration that had work (the rest of `busy` is admission, sampling, streaming).
  struct StepTime {
    int64_t steps = 0, rows = 0;
    double seconds = 0;
  };
  StepTime decode_steps, window_steps;
  int64_t mixed_steps = 0;  // window steps that carried every decoding sequence's row too (mixed_steps)
  double snapshot_seconds = 0, busy_seconds = 0;
};

class Scheduler {
 public:
  // `model_stop_ids` end every request (unless ignore_eos). The model, tokenizer and pool must
  // outlive the scheduler. Error when the options are out of range.
  Scheduler(const Qwen35Model& model, const text::Tokenizer& tokenizer, std::vector<int32_t> model_stop_ids, const SchedulerOptions& options,
            ThreadPool& pool);
  ~Scheduler();  // cancels what is left and stops the loop
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Thread-safe. Throws SubmitError (Invalid: empty prompt, ids outside the vocabulary, sampling
  // out of range, n outside [1, max_seqs]; TooLong: prompt + max_tokens over ctx_size; QueueFull;
  // Closed after close()).
  std::shared_ptr<RequestHandle> submit(GenerationRequest request);

  // No new requests from now on; the ones accepted run to their end.
  void close();
  // Waits until nothing waits or runs (true) or `timeout` passes (false).
  bool wait_idle(std::chrono::milliseconds timeout);

  SchedulerStats stats() const;
  const SchedulerOptions& options() const { return options_; }
  // Snapshot positions are multiples of this: the DeltaNet window chunk when prefill_chunk is a
  // multiple of it, else prefill_chunk.
  int64_t align() const { return align_; }

 private:
  struct Sequence;
  using Running = std::vector<std::unique_ptr<Sequence>>;
  void loop();
  void admit(Running& running);
  int64_t outstanding_blocks(const Running& running) const;
  int reserved_slots(const Running& running) const;
  Step plan_decode(const Running& running, std::vector<Sequence*>& seqs) const;
  Step plan_window(const Running& running, std::vector<Sequence*>& seqs) const;
  int64_t next_chunk_end(const Sequence& s) const;
  void decode(Running& running);
  void decode_speculative(Step& step, const std::vector<Sequence*>& seqs);
  void release_slots(Sequence& s);
  void window(Running& running);
  bool mixes(const Running& running) const;
  void mixed(Running& running);
  void window_results(Running& running, const Step& step, const std::vector<Sequence*>& seqs, std::size_t first, bool argmax);
  std::vector<Sequence*> fork_choices(Sequence& s, Running& running);
  void on_token(Sequence& seq, const SampledToken& token);
  void finish(Sequence& seq, FinishReason reason, OutputDelta delta = {}, const std::string& error = {});
  // Runs a step of `seqs` into out_, or with `argmax` (every row picks_argmax) only each row's
  // argmax into picks_ (false, with each failed, when it throws or is empty).
  bool run_step(const Step& step, const std::vector<Sequence*>& seqs, bool argmax = false);
  static bool picks_argmax(const Sequence& s);
  // Samples sequence `s`'s next token from row `row` of out_'s logits.
  void sample(Sequence& s, std::size_t row);
  void fail_step(const std::vector<Sequence*>& seqs, const std::exception& e);
  void publish(const Running& running);  // the loop's state into totals_ for stats()

  const Qwen35Model& model_;
  const text::Tokenizer& tokenizer_;
  std::vector<int32_t> stop_ids_;
  SchedulerOptions options_;
  ThreadPool& pool_;
  ModelCache cache_;
  std::unique_ptr<ModelCache> mtp_cache_;  // the MTP block's own KV, one slot per sequence (speculative only)
  PrefixCache prefix_;                     // used by the loop thread only
  int64_t align_ = 1;
  StepOutput out_;
  std::vector<int32_t> picks_;
  std::array<int64_t, 6> finished_{};  // by FinishReason (loop thread; published to totals_)

  mutable std::mutex mutex_;
  std::condition_variable cv_, idle_cv_;
  std::deque<std::unique_ptr<Sequence>> waiting_;
  int running_count_ = 0;
  bool closed_ = false, stop_ = false;
  SchedulerStats totals_;
  std::thread thread_;
};

}  // namespace qwenrt
