#pragma once
// Continuous batching: one thread owns the model and its cache and serves every request.
//
// Requests are submitted from any thread and come back as a RequestHandle, a stream of events
// (text, reasoning and tool-call deltas, then one finish with usage) that can be cancelled. Each
// iteration of the scheduler loop:
//   (a) admits waiting requests into free cache slots (at most max_seqs run at once),
//   (b) runs ONE decode step (Phase::Decode): one row for every running sequence whose prompt is in,
//   (c) runs at most ONE window step (Phase::Window): prompt chunks of prefilling sequences under a
//       token budget, so a long prompt never stalls the other streams (chunked prefill).
// Decode rows and prompt rows never share a step, and prompt chunks always end at multiples of
// prefill_chunk, so a sequence's logits do not depend on what else runs (batch invariance on the
// CPU). Each sequence samples its own row with its own SamplingParams and turns tokens into text
// through TextOutput (stop strings, reasoning split, tool calls), as `qwenrt run` does. A cancelled
// request leaves (its slot released) at the start of the next iteration.
//
// Seams for what comes later: admission (plan_admission) is where pools of KV blocks / DeltaNet
// states and the prefix cache will decide; the step building (build_decode / build_window) is the
// one place that decides what each step computes (speculation, on-device sampling).
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "core/thread_pool.h"
#include "engine/sampler.h"
#include "engine/text_output.h"
#include "model/qwen35_model.h"
#include "text/tokenizer/tokenizer.h"

namespace qwenrt {

struct GenerationRequest {
  std::vector<int32_t> prompt;
  SamplingParams sampling;
  int64_t max_tokens = 256;
  bool ignore_eos = false;        // the model's stop ids do not end generation (fixed-length benchmarks)
  std::vector<int32_t> stop_ids;  // more ids that end generation
  TextOutputOptions output;
};

enum class FinishReason { Stop, Length, StopString, ToolCalls, Cancelled, Error };
const char* finish_reason_name(FinishReason reason);  // "stop", "length", ...

struct GenerationEvent {
  OutputDelta delta;
  bool finished = false;  // the last event of a request
  FinishReason finish = FinishReason::Stop;
  std::string stop_string;  // FinishReason::StopString: which one
  std::string error;        // FinishReason::Error
  int64_t prompt_tokens = 0, completion_tokens = 0;
};

class RequestHandle {
 public:
  // Moves the events that arrived into `out`, waiting up to `timeout` for the first one. Returns
  // false once the finish event has been handed out (nothing more will come).
  bool wait(std::vector<GenerationEvent>& out, std::chrono::milliseconds timeout);
  // The request ends (FinishReason::Cancelled) and frees its slot at the next iteration.
  void cancel() { cancelled_ = true; }
  bool cancelled() const { return cancelled_; }

 private:
  friend class Scheduler;
  void push(GenerationEvent&& event);

  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<GenerationEvent> events_;
  bool finished_ = false;  // the finish event was pushed
  bool drained_ = false;   // and handed out
  std::atomic<bool> cancelled_{false};
};

struct SchedulerOptions {
  int max_seqs = 8;             // cache slots: sequences that run at once
  int64_t ctx_size = 8192;      // prompt + max_tokens of one request
  int max_queue = 64;           // requests waiting for a slot
  int64_t prefill_chunk = 512;  // prompt chunks end at multiples of this
  int64_t window_budget = 512;  // prompt rows of one window step (at least one chunk runs)
};

// Why submit refused a request.
class SubmitError : public std::runtime_error {
 public:
  enum class Kind { Invalid, TooLong, QueueFull, Closed };
  SubmitError(Kind kind, const std::string& message) : std::runtime_error(message), kind(kind) {}
  Kind kind;
};

struct SchedulerStats {
  int waiting = 0, running = 0, free_slots = 0;
  int64_t requests = 0, prompt_tokens = 0, generated_tokens = 0, steps = 0;
};

class Scheduler {
 public:
  // `model_stop_ids` end every request (unless ignore_eos). The model, tokenizer and pool must
  // outlive the scheduler.
  Scheduler(const Qwen35Model& model, const text::Tokenizer& tokenizer, std::vector<int32_t> model_stop_ids, const SchedulerOptions& options,
            ThreadPool& pool);
  ~Scheduler();  // cancels what is left and stops the loop
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Thread-safe. Throws SubmitError (Invalid: empty prompt, ids outside the vocabulary, sampling
  // out of range; TooLong: prompt + max_tokens over ctx_size; QueueFull; Closed after close()).
  std::shared_ptr<RequestHandle> submit(GenerationRequest request);

  // No new requests from now on; the ones accepted run to their end.
  void close();
  // Waits until nothing waits or runs (true) or `timeout` passes (false).
  bool wait_idle(std::chrono::milliseconds timeout);

  SchedulerStats stats() const;
  const SchedulerOptions& options() const { return options_; }

 private:
  struct Sequence;
  void loop();
  void admit(std::vector<std::unique_ptr<Sequence>>& running);
  void decode(std::vector<std::unique_ptr<Sequence>>& running);
  void window(std::vector<std::unique_ptr<Sequence>>& running);
  void on_token(Sequence& seq, int32_t token);
  void finish(Sequence& seq, FinishReason reason, OutputDelta delta = {}, const std::string& error = {});
  // Runs a step of `seqs` into out_ (false, with each failed, when it throws or is empty).
  bool run_step(const Step& step, const std::vector<Sequence*>& seqs);
  // Samples sequence `s`'s next token from row `row` of out_'s logits.
  void sample(Sequence& s, std::size_t row);
  void fail_step(const std::vector<Sequence*>& seqs, const std::exception& e);

  const Qwen35Model& model_;
  const text::Tokenizer& tokenizer_;
  std::vector<int32_t> stop_ids_;
  SchedulerOptions options_;
  ThreadPool& pool_;
  ModelCache cache_;
  StepOutput out_;

  mutable std::mutex mutex_;
  std::condition_variable cv_, idle_cv_;
  std::deque<std::unique_ptr<Sequence>> waiting_;
  int running_count_ = 0;
  bool closed_ = false, stop_ = false;
  SchedulerStats totals_;
  std::thread thread_;
};

}  // namespace qwenrt
