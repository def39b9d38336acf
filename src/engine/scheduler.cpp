#include "engine/scheduler.h"

#include <algorithm>
#include <cstdio>

#include "core/error.h"

namespace qwenrt {

const char* finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::Stop: return "stop";
    case FinishReason::Length: return "length";
    case FinishReason::StopString: return "stop";
    case FinishReason::ToolCalls: return "tool_calls";
    case FinishReason::Cancelled: return "cancelled";
    case FinishReason::Error: return "error";
  }
  return "stop";
}

bool RequestHandle::wait(std::vector<GenerationEvent>& out, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  if (drained_) return false;
  cv_.wait_for(lock, timeout, [&] { return !events_.empty(); });
  while (!events_.empty()) {
    out.push_back(std::move(events_.front()));
    events_.pop_front();
  }
  if (finished_) drained_ = true;
  return true;
}

void RequestHandle::push(GenerationEvent&& event) {
  {
    std::lock_guard lock(mutex_);
    if (finished_) return;
    if (event.finished) finished_ = true;
    events_.push_back(std::move(event));
  }
  cv_.notify_all();
}

struct Scheduler::Sequence {
  Sequence(const text::Tokenizer& tokenizer, GenerationRequest&& r, std::shared_ptr<RequestHandle> h)
      : request(std::move(r)), handle(std::move(h)), sampler(request.sampling), text(tokenizer, request.output) {}
  GenerationRequest request;
  std::shared_ptr<RequestHandle> handle;
  Sampler sampler;
  TextOutput text;
  int slot = -1;
  std::size_t prefilled = 0;  // prompt tokens in the cache
  std::vector<int32_t> output;
  bool done = false;
};

Scheduler::Scheduler(const Qwen35Model& model, const text::Tokenizer& tokenizer, std::vector<int32_t> model_stop_ids, const SchedulerOptions& options,
                     ThreadPool& pool)
    : model_(model),
      tokenizer_(tokenizer),
      stop_ids_(std::move(model_stop_ids)),
      options_(options),
      pool_(pool),
      cache_(model.new_cache(options.max_seqs)) {
  if (options_.max_seqs < 1 || options_.ctx_size < 2 || options_.max_queue < 0 || options_.prefill_chunk < 1 || options_.window_budget < 1)
    fail("scheduler: invalid options");
  thread_ = std::thread([this] { loop(); });
}

Scheduler::~Scheduler() {
  {
    std::lock_guard lock(mutex_);
    stop_ = closed_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::shared_ptr<RequestHandle> Scheduler::submit(GenerationRequest request) {
  using K = SubmitError::Kind;
  if (request.prompt.empty()) throw SubmitError(K::Invalid, "the prompt is empty");
  const int32_t vocab = static_cast<int32_t>(model_.config().vocab_size);
  for (int32_t id : request.prompt)
    if (id < 0 || id >= vocab)
      throw SubmitError(K::Invalid, "token id " + std::to_string(id) + " is outside the vocabulary [0, " + std::to_string(vocab) + ")");
  if (request.max_tokens < 1) throw SubmitError(K::Invalid, "max_tokens must be at least 1");
  try {
    request.sampling.validate();
  } catch (const Error& e) {
    throw SubmitError(K::Invalid, e.what());
  }
  const int64_t need = static_cast<int64_t>(request.prompt.size()) + request.max_tokens;
  if (need > options_.ctx_size)
    throw SubmitError(K::TooLong, "the prompt (" + std::to_string(request.prompt.size()) + " tokens) plus max_tokens (" +
                                      std::to_string(request.max_tokens) + ") is more than the context of " + std::to_string(options_.ctx_size) +
                                      " tokens");
  auto handle = std::make_shared<RequestHandle>();
  auto seq = std::make_unique<Sequence>(tokenizer_, std::move(request), handle);
  {
    std::lock_guard lock(mutex_);
    if (closed_) throw SubmitError(K::Closed, "the server is shutting down");
    // Requests that a free slot takes at the next iteration do not count against max_queue.
    const int free_slots = std::max(0, options_.max_seqs - running_count_);
    if (static_cast<int>(waiting_.size()) >= options_.max_queue + free_slots)
      throw SubmitError(K::QueueFull, "too many requests waiting (" + std::to_string(waiting_.size()) + ")");
    waiting_.push_back(std::move(seq));
    ++totals_.requests;
  }
  cv_.notify_all();
  return handle;
}

void Scheduler::close() {
  std::lock_guard lock(mutex_);
  closed_ = true;
}

bool Scheduler::wait_idle(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  return idle_cv_.wait_for(lock, timeout, [&] { return waiting_.empty() && running_count_ == 0; });
}

SchedulerStats Scheduler::stats() const {
  std::lock_guard lock(mutex_);
  SchedulerStats s = totals_;
  s.waiting = static_cast<int>(waiting_.size());
  s.running = running_count_;
  s.free_slots = options_.max_seqs - running_count_;
  return s;
}

void Scheduler::loop() {
  std::vector<std::unique_ptr<Sequence>> running;
  while (true) {
    {
      std::unique_lock lock(mutex_);
      cv_.wait(lock, [&] { return stop_ || !waiting_.empty() || !running.empty(); });
      if (stop_) break;
    }
    admit(running);
    // Cancelled requests leave before the steps.
    for (auto& s : running)
      if (!s->done && s->handle->cancelled()) finish(*s, FinishReason::Cancelled);
    decode(running);
    window(running);
    // Finished sequences give their slots back.
    std::size_t kept = 0;
    for (auto& s : running) {
      if (s->done) {
        cache_.release(s->slot);
      } else {
        running[kept++] = std::move(s);
      }
    }
    running.resize(kept);
    {
      std::lock_guard lock(mutex_);
      running_count_ = static_cast<int>(running.size());
      ++totals_.steps;
      if (waiting_.empty() && running.empty()) idle_cv_.notify_all();
    }
  }
  // Stopped: whatever is left ends as cancelled.
  std::deque<std::unique_ptr<Sequence>> waiting;
  {
    std::lock_guard lock(mutex_);
    waiting.swap(waiting_);
    running_count_ = 0;
  }
  for (auto& s : running)
    if (!s->done) finish(*s, FinishReason::Cancelled);
  for (auto& s : waiting) finish(*s, FinishReason::Cancelled);
  idle_cv_.notify_all();
}

// Admission: a slot per sequence, in arrival order. (Pools of KV blocks and DeltaNet states and the
// prefix cache will decide here: how much of the prompt is already cached, whether memory is left.)
void Scheduler::admit(std::vector<std::unique_ptr<Sequence>>& running) {
  std::lock_guard lock(mutex_);
  while (!waiting_.empty()) {
    auto& front = waiting_.front();
    if (front->handle->cancelled()) {
      finish(*front, FinishReason::Cancelled);
      waiting_.pop_front();
      continue;
    }
    if (static_cast<int>(running.size()) >= options_.max_seqs) break;
    front->slot = cache_.acquire();
    totals_.prompt_tokens += static_cast<int64_t>(front->request.prompt.size());
    running.push_back(std::move(front));
    waiting_.pop_front();
  }
  running_count_ = static_cast<int>(running.size());
}

void Scheduler::decode(std::vector<std::unique_ptr<Sequence>>& running) {
  Step step{Phase::Decode, {}, false};
  std::vector<Sequence*> seqs;
  for (auto& s : running) {
    if (s->done || s->prefilled < s->request.prompt.size()) continue;
    step.sequences.push_back({s->slot, {s->output.back()}, {}, {}});
    seqs.push_back(s.get());
  }
  if (!run_step(step, seqs)) return;
  for (std::size_t i = 0; i < seqs.size(); ++i) sample(*seqs[i], i);
}

bool Scheduler::run_step(const Step& step, const std::vector<Sequence*>& seqs) {
  if (seqs.empty()) return false;
  try {
    model_.forward(step, cache_, pool_, out_);
  } catch (const std::exception& e) {
    fail_step(seqs, e);
    return false;
  }
  return true;
}

void Scheduler::sample(Sequence& s, std::size_t row) {
  const std::size_t V = static_cast<std::size_t>(model_.config().vocab_size);
  const SampledToken t = s.sampler.sample({out_.logits.data() + row * V, V}, s.request.prompt, s.output);
  on_token(s, t.id);
}

void Scheduler::window(std::vector<std::unique_ptr<Sequence>>& running) {
  Step step{Phase::Window, {}, false};
  std::vector<Sequence*> seqs;
  int64_t budget = options_.window_budget;
  for (auto& s : running) {
    const std::size_t n = s->request.prompt.size();
    if (s->done || s->prefilled >= n) continue;
    // Chunks end at multiples of prefill_chunk whatever else runs.
    const std::size_t chunk = static_cast<std::size_t>(options_.prefill_chunk);
    const std::size_t end = std::min(n, (s->prefilled / chunk + 1) * chunk);
    const int64_t rows = static_cast<int64_t>(end - s->prefilled);
    if (rows > budget && !seqs.empty()) continue;
    budget -= rows;
    step.sequences.push_back(
        {s->slot, {s->request.prompt.begin() + static_cast<long>(s->prefilled), s->request.prompt.begin() + static_cast<long>(end)}, {}, {}});
    seqs.push_back(s.get());
    if (budget <= 0) break;
  }
  if (!run_step(step, seqs)) return;
  for (std::size_t i = 0; i < seqs.size(); ++i) {
    Sequence& s = *seqs[i];
    s.prefilled += step.sequences[i].tokens.size();
    if (s.prefilled < s.request.prompt.size()) continue;
    sample(s, i);
  }
}

void Scheduler::on_token(Sequence& s, int32_t token) {
  s.output.push_back(token);
  {
    std::lock_guard lock(mutex_);
    ++totals_.generated_tokens;
  }
  const bool stop_id = std::find(s.request.stop_ids.begin(), s.request.stop_ids.end(), token) != s.request.stop_ids.end() ||
                       (!s.request.ignore_eos && std::find(stop_ids_.begin(), stop_ids_.end(), token) != stop_ids_.end());
  OutputDelta delta = s.text.push(token);
  if (s.text.stopped()) return finish(s, FinishReason::StopString, std::move(delta));
  if (stop_id) return finish(s, FinishReason::Stop, std::move(delta));
  if (static_cast<int64_t>(s.output.size()) >= s.request.max_tokens) return finish(s, FinishReason::Length, std::move(delta));
  if (!delta.empty()) {
    GenerationEvent e;
    e.delta = std::move(delta);
    s.handle->push(std::move(e));
  }
}

void Scheduler::finish(Sequence& s, FinishReason reason, OutputDelta delta, const std::string& error) {
  if (s.done) return;
  s.done = true;
  if (reason != FinishReason::Cancelled && reason != FinishReason::Error) delta.append(s.text.finish());
  if (reason == FinishReason::Stop && s.text.tool_call_count() > 0) reason = FinishReason::ToolCalls;
  GenerationEvent e;
  e.delta = std::move(delta);
  e.finished = true;
  e.finish = reason;
  if (reason == FinishReason::StopString) e.stop_string = s.text.stop_hit();
  e.error = error;
  e.prompt_tokens = static_cast<int64_t>(s.request.prompt.size());
  e.completion_tokens = static_cast<int64_t>(s.output.size());
  s.handle->push(std::move(e));
}

void Scheduler::fail_step(const std::vector<Sequence*>& seqs, const std::exception& e) {
  std::fprintf(stderr, "qwenrt scheduler: step failed: %s\n", e.what());
  for (Sequence* s : seqs) finish(*s, FinishReason::Error, {}, e.what());
}

}  // namespace qwenrt
