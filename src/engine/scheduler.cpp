#include "engine/scheduler.h"

#include <algorithm>
#include <cstdio>
#include <limits>

#include "core/error.h"

namespace qwenrt {

using Clock = std::chrono::steady_clock;

namespace {
// Rows a sequence that does not draft (above speculate_max_seqs) keeps for its MTP block.
constexpr std::size_t kMaxPendingMtpRows = 256;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }
}  // namespace

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
    if (event.finished && --open_choices_ == 0) event.last = finished_ = true;
    events_.push_back(std::move(event));
  }
  cv_.notify_all();
}

namespace {
SamplingParams choice_sampling(SamplingParams p, int choice) {
  p.seed += static_cast<uint64_t>(choice);  // each choice its own stream
  return p;
}
int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
}  // namespace

struct Scheduler::Sequence {
  Sequence(const text::Tokenizer& tokenizer, GenerationRequest r, std::shared_ptr<RequestHandle> h, int choice)
      : request(std::move(r)),
        handle(std::move(h)),
        sampler(choice_sampling(request.sampling, choice)),
        text(tokenizer, request.output),
        choice(choice),
        submitted(Clock::now()) {}
  int64_t prompt_size() const { return static_cast<int64_t>(request.prompt.size()); }
  int64_t max_length() const { return prompt_size() + request.max_tokens; }

  GenerationRequest request;
  std::shared_ptr<RequestHandle> handle;
  Sampler sampler;
  TextOutput text;
  int choice = 0;
  int slot = -1;
  int64_t prefilled = 0;  // prompt tokens in the cache
  int64_t cached = 0;     // of which resumed from the prefix cache
  int forks_pending = 0;  // choices still to fork from this one when its prompt is in
  std::vector<int32_t> output;
  std::vector<TokenLogprob> logprobs;  // not yet sent
  bool done = false;
  // Speculation: the MTP block's slot and this sequence's drafter; the current step's drafts, where
  // its window starts and the time drafting took.
  int mtp_slot = -1;
  std::unique_ptr<MtpDrafter> drafter;
  std::vector<int32_t> drafts;
  int64_t verify_start = 0;
  double draft_s = 0;
  Clock::time_point submitted, last_token;
};

Scheduler::Scheduler(const Qwen35Model& model, const text::Tokenizer& tokenizer, std::vector<int32_t> model_stop_ids, const SchedulerOptions& options,
                     ThreadPool& pool)
    : model_(model),
      tokenizer_(tokenizer),
      stop_ids_(std::move(model_stop_ids)),
      options_(options),
      pool_(pool),
      cache_([&] {
        if (options.max_seqs < 1 || options.ctx_size < 2 || options.max_queue < 0 || options.prefill_chunk < 1 || options.window_budget < 1 ||
            options.kv_blocks < 0 || options.snapshot_interval < 1)
          fail("scheduler: invalid options");
        // The pool holds at least one full context, so every request that passes submit() fits alone.
        const int64_t per_context = ceil_div(options.ctx_size, Qwen35Model::kCacheBlockSize);
        const int64_t blocks = options.kv_blocks > 0 ? std::max(options.kv_blocks, per_context) : per_context * options.max_seqs;
        return model.new_cache(options.max_seqs, blocks);
      }()),
      prefix_(cache_, options.prefix_cache_bytes) {
  if (options_.speculative) {
    if (options_.speculation.max_draft_tokens < 1 || options_.speculate_max_seqs < 0) fail("scheduler: invalid speculation options");
    if (!model.has_mtp()) fail("--speculative mtp: this checkpoint has no MTP block (no mtp.* tensors)");
    mtp_cache_ = std::make_unique<ModelCache>(model.new_mtp_cache(options_.max_seqs));
  }
  align_ = options_.prefill_chunk % Qwen35Model::kWindowChunk == 0 ? Qwen35Model::kWindowChunk : options_.prefill_chunk;
  options_.snapshot_interval = ceil_div(options_.snapshot_interval, align_) * align_;
  options_.kv_blocks = cache_.max_blocks();
  totals_.kv_blocks = cache_.max_blocks();
  totals_.kv_bytes_per_block = cache_.kv_bytes_per_block();
  totals_.state_bytes_per_slot = cache_.state_bytes_per_sequence();
  totals_.free_slots = options_.max_seqs;
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
  if (request.n < 1 || request.n > options_.max_seqs)
    throw SubmitError(K::Invalid, "n must be between 1 and " + std::to_string(options_.max_seqs) + " (--max-seqs)");
  try {
    request.sampling.validate();
  } catch (const Error& e) {
    throw SubmitError(K::Invalid, e.what());
  }
  const int64_t prompt = static_cast<int64_t>(request.prompt.size()), need = prompt + request.max_tokens;
  if (need > options_.ctx_size)
    throw SubmitError(K::TooLong, "the prompt (" + std::to_string(prompt) + " tokens) plus max_tokens (" + std::to_string(request.max_tokens) +
                                      ") is more than the context of " + std::to_string(options_.ctx_size) + " tokens");
  const int64_t B = cache_.block_size(), n = request.n;
  if (cache_.kv_bytes_per_token() > 0 && n * ceil_div(need, B) - (n - 1) * (prompt / B) > cache_.max_blocks())
    throw SubmitError(K::TooLong, std::to_string(n) + " choices of " + std::to_string(need) + " tokens do not fit the KV pool of " +
                                      std::to_string(cache_.max_blocks() * B) + " tokens");
  auto handle = std::make_shared<RequestHandle>();
  handle->open_choices_ = request.n;
  auto seq = std::make_unique<Sequence>(tokenizer_, std::move(request), handle, 0);
  seq->forks_pending = seq->request.n - 1;
  {
    std::lock_guard lock(mutex_);
    if (closed_) throw SubmitError(K::Closed, "the server is shutting down");
    // Requests that free slots take at the next iteration do not count against max_queue.
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
  return s;
}

void Scheduler::publish(const Running& running) {
  std::lock_guard lock(mutex_);
  running_count_ = static_cast<int>(running.size());
  totals_.running = running_count_;
  totals_.free_slots = cache_.free_slots();
  totals_.kv_blocks_used = cache_.blocks_in_use();
  totals_.prefix = prefix_.stats();
  totals_.finished = finished_;
  if (waiting_.empty() && running.empty()) idle_cv_.notify_all();
}

void Scheduler::loop() {
  Running running;
  while (true) {
    {
      std::unique_lock lock(mutex_);
      cv_.wait(lock, [&] { return stop_ || !waiting_.empty() || !running.empty(); });
      if (stop_) break;
    }
    const auto busy_from = Clock::now();
    admit(running);
    // Cancelled requests leave before the steps.
    for (auto& s : running)
      if (!s->done && s->handle->cancelled()) finish(*s, FinishReason::Cancelled);
    if (mixes(running)) {
      mixed(running);
    } else {
      decode(running);
      window(running);
    }
    // Finished sequences give their slots back.
    std::size_t kept = 0;
    for (auto& s : running) {
      if (s->done) {
        release_slots(*s);
      } else {
        running[kept++] = std::move(s);
      }
    }
    running.resize(kept);
    {
      std::lock_guard lock(mutex_);
      ++totals_.steps;
      totals_.busy_seconds += seconds_since(busy_from);
    }
    publish(running);
  }
  // Stopped: whatever is left ends as cancelled.
  std::deque<std::unique_ptr<Sequence>> waiting;
  {
    std::lock_guard lock(mutex_);
    waiting.swap(waiting_);
  }
  for (auto& s : running) {
    if (!s->done) finish(*s, FinishReason::Cancelled);
    release_slots(*s);
  }
  running.clear();
  for (auto& s : waiting) finish(*s, FinishReason::Cancelled);
  publish(running);
}

void Scheduler::release_slots(Sequence& s) {
  cache_.release(s.slot);
  s.drafter.reset();
  if (s.mtp_slot >= 0) mtp_cache_->release(s.mtp_slot);
  s.mtp_slot = -1;
}

// Blocks the running sequences may still take from the pool (their reservations less what they hold).
int64_t Scheduler::outstanding_blocks(const Running& running) const {
  const int64_t B = cache_.block_size();
  int64_t n = 0;
  for (const auto& s : running) {
    if (s->done) continue;
    n += cache_.blocks_needed(s->slot, s->max_length());
    if (cache_.kv_bytes_per_token() > 0) n += s->forks_pending * (ceil_div(s->max_length(), B) - s->prompt_size() / B);
  }
  return n;
}

int Scheduler::reserved_slots(const Running& running) const {
  int n = 0;
  for (const auto& s : running) n += s->done ? 0 : s->forks_pending;
  return n;
}

// Admission, in arrival order: a request runs when its choices' slots and KV blocks (prompt +
// max_tokens each, less what a cached prefix already holds) fit beside the reservations of those
// running; least recently used prefix-cache entries give their blocks back. Else it waits.
void Scheduler::admit(Running& running) {
  std::lock_guard lock(mutex_);
  while (!waiting_.empty()) {
    auto& front = waiting_.front();
    if (front->handle->cancelled()) {
      finish(*front, FinishReason::Cancelled);
      waiting_.pop_front();
      continue;
    }
    Sequence& s = *front;
    if (cache_.free_slots() - reserved_slots(running) < s.request.n) break;
    const int64_t B = cache_.block_size(), cached = prefix_.match(s.request.prompt, s.prompt_size() - 1);
    // Blocks: this choice's growth to max_length past the cached prefix's full blocks, and each
    // other choice's own blocks past the prompt's full blocks.
    int64_t need = 0;
    if (cache_.kv_bytes_per_token() > 0)
      need = ceil_div(s.max_length(), B) - cached / B + s.forks_pending * (ceil_div(s.max_length(), B) - s.prompt_size() / B);
    const int64_t outstanding = outstanding_blocks(running);
    // (Optimistic by the cached prefix's blocks when only the cache holds them: checked exactly below.)
    if (cache_.max_blocks() > 0 && need + outstanding > cache_.free_blocks() + prefix_.evictable_blocks()) break;
    const int slot = cache_.acquire();
    if (cached > 0) prefix_.restore(s.request.prompt, cached, slot);
    if (cache_.max_blocks() > 0) {
      // The prefix is held by the slot now, so what eviction can free is exact.
      if (need + outstanding > cache_.free_blocks() + prefix_.evictable_blocks()) {
        cache_.release(slot);
        break;
      }
      prefix_.evict_for_blocks(need + outstanding);
    }
    prefix_.record_lookup(cached);
    if (mtp_cache_) {
      // The MTP block sees the rows this request computes (a cached prefix has no hidden rows).
      s.mtp_slot = mtp_cache_->acquire();
      s.drafter = std::make_unique<MtpDrafter>(model_, *mtp_cache_, s.mtp_slot, cached, options_.speculation);
    }
    s.slot = slot;
    s.prefilled = s.cached = cached;
    totals_.prompt_tokens += s.prompt_size();
    totals_.cached_tokens += cached;
    running.push_back(std::move(front));
    waiting_.pop_front();
  }
}

Step Scheduler::plan_decode(const Running& running, std::vector<Sequence*>& seqs) const {
  Step step{Phase::Decode, {}, false};
  for (const auto& s : running) {
    if (s->done || s->prefilled < s->prompt_size()) continue;
    step.sequences.push_back({s->slot, {s->output.back()}, {}, {}});
    seqs.push_back(s.get());
  }
  return step;
}

// Where the next prompt chunk of `s` ends: the next multiple of prefill_chunk, or (with the prefix
// cache) the next snapshot point: a multiple of snapshot_interval, or the prompt's last multiple of
// align() before its last token. All are multiples of align(), so the split changes no bits.
int64_t Scheduler::next_chunk_end(const Sequence& s) const {
  const int64_t n = s.prompt_size(), p = s.prefilled, chunk = options_.prefill_chunk;
  int64_t end = std::min(n, (p / chunk + 1) * chunk);
  if (prefix_.enabled()) {
    const int64_t interval = options_.snapshot_interval, last = (n - 1) / align_ * align_;
    end = std::min(end, (p / interval + 1) * interval);
    if (last > p) end = std::min(end, last);
  }
  return end;
}

Step Scheduler::plan_window(const Running& running, std::vector<Sequence*>& seqs) const {
  Step step{Phase::Window, {}, false};
  step.hidden_all = mtp_cache_ != nullptr;  // every row's hidden state for the MTP block (logits of the last rows only)
  int64_t budget = options_.window_budget;
  for (const auto& s : running) {
    if (s->done || s->prefilled >= s->prompt_size()) continue;
    const int64_t end = next_chunk_end(*s), rows = end - s->prefilled;
    if (rows > budget && !seqs.empty()) continue;
    budget -= rows;
    const auto& prompt = s->request.prompt;
    step.sequences.push_back({s->slot, {prompt.begin() + s->prefilled, prompt.begin() + end}, {}, {}});
    seqs.push_back(s.get());
    if (budget <= 0) break;
  }
  return step;
}

// A sequence whose next token is the plain argmax of its logits row: greedy, no penalties (they
// change the logits first), no logprobs, nobody watching the row.
bool Scheduler::picks_argmax(const Sequence& s) {
  const SamplingParams& p = s.request.sampling;
  return p.temperature == 0.0f && p.repetition_penalty == 1.0f && p.presence_penalty == 0.0f && p.frequency_penalty == 0.0f && !p.logprobs &&
         p.top_logprobs == 0 && !s.request.on_logits;
}

void Scheduler::decode(Running& running) {
  std::vector<Sequence*> seqs;
  Step step = plan_decode(running, seqs);
  if (mtp_cache_ && !seqs.empty()) return decode_speculative(step, seqs);
  if (!seqs.empty() && std::all_of(seqs.begin(), seqs.end(), [](const Sequence* s) { return picks_argmax(*s); })) {
    // Every row wants only its argmax: the model picks it where it runs (on a GPU the [rows, V]
    // logits never come home). The same token the sampler would take (first maximum).
    if (!run_step(step, seqs, /*argmax=*/true)) return;
    for (std::size_t i = 0; i < seqs.size(); ++i) on_token(*seqs[i], SampledToken::picked(picks_[i]));
    return;
  }
  if (!run_step(step, seqs)) return;
  for (std::size_t i = 0; i < seqs.size(); ++i) sample(*seqs[i], i);
}

// The decode step with MTP drafts: every sequence's window [its token, d1 .. dk] verified in one
// committed step (k = 0 for all above speculate_max_seqs), each window's rows sampled in order
// while they agree with the drafts, and each cache cut back to the accepted rows.
void Scheduler::decode_speculative(Step& step, const std::vector<Sequence*>& seqs) {
  const bool drafting = static_cast<int>(seqs.size()) <= options_.speculate_max_seqs;
  const int64_t limit = model_.config().max_position_embeddings;
  bool any_drafts = false;
  try {
    // Every drafting sequence's MTP steps together: one catch-up step, then one per further draft.
    std::vector<MtpDrafter*> drafters;
    std::vector<int> ks;
    std::vector<std::size_t> which;
    for (std::size_t i = 0; i < seqs.size(); ++i) {
      Sequence& s = *seqs[i];
      s.verify_start = cache_.length(s.slot);
      s.drafts.clear();
      s.draft_s = 0;
      if (!drafting) continue;
      // Drafts past the tokens still wanted (or the model's context) would never be emitted.
      int64_t room = s.request.max_tokens - static_cast<int64_t>(s.output.size()) - 1;
      if (limit > 0) room = std::min(room, limit - s.verify_start - 1);
      const int k = s.drafter->choose(room);
      if (k == 0) continue;
      drafters.push_back(s.drafter.get());
      ks.push_back(k);
      which.push_back(i);
    }
    if (!drafters.empty()) {
      const auto t0 = Clock::now();
      std::vector<double> catch_up_s;
      std::vector<std::vector<int32_t>> drafts = MtpDrafter::draft_together(drafters, ks, pool_, catch_up_s);
      const double draft_s = seconds_since(t0);
      for (std::size_t d = 0; d < which.size(); ++d) {
        Sequence& s = *seqs[which[d]];
        s.drafts = std::move(drafts[d]);
        s.draft_s = draft_s - catch_up_s[d];
        auto& tokens = step.sequences[which[d]].tokens;
        tokens.insert(tokens.end(), s.drafts.begin(), s.drafts.end());
        cache_.keep_row_states(s.slot, ks[d] + 1);
        any_drafts = true;
      }
    }
  } catch (const std::exception& e) {
    for (Sequence* s : seqs) cache_.drop_row_states(s->slot);
    fail_step(seqs, e);
    return;
  }
  step.phase = any_drafts ? Phase::Committed : Phase::Decode;
  step.all_logits = step.hidden = true;  // every window row's logits; hidden rows for the MTP block
  const auto t0 = Clock::now();
  if (!run_step(step, seqs)) {
    for (Sequence* s : seqs) cache_.drop_row_states(s->slot);
    return;
  }
  const double step_s = seconds_since(t0);
  const auto H = static_cast<std::size_t>(model_.config().hidden_size);
  int64_t drafted = 0, accepted = 0, rounds = 0;
  std::size_t row = 0;
  for (Sequence* sp : seqs) {
    Sequence& s = *sp;
    const int k = static_cast<int>(s.drafts.size());
    std::vector<int32_t> emitted;
    bool stopped = false;
    const int keep = accept_drafts(
        s.drafts,
        [&](int r) {
          sample(s, row + static_cast<std::size_t>(r));
          return RowPick{s.output.back(), s.done};
        },
        emitted, stopped);
    try {
      keep_verified_rows(cache_, s.slot, s.verify_start, k, keep);
      if (!s.done)
        s.drafter->after_verify(s.verify_start, k, std::span<const float>(out_.hidden).subspan(row * H, static_cast<std::size_t>(keep) * H), emitted);
      if (drafting) s.drafter->record(k, keep, stopped, s.draft_s + step_s);
      else if (!s.done) s.drafter->bound_pending(kMaxPendingMtpRows);
    } catch (const std::exception& e) {
      fail_step({&s}, e);
    }
    drafted += k;
    accepted += keep - 1;
    rounds += k > 0;
    row += static_cast<std::size_t>(k) + 1;
  }
  std::lock_guard lock(mutex_);
  totals_.spec_drafted += drafted;
  totals_.spec_accepted += accepted;
  totals_.spec_rounds += rounds;
}

void Scheduler::window(Running& running) {
  std::vector<Sequence*> seqs;
  const Step step = plan_window(running, seqs);
  if (!run_step(step, seqs)) return;
  window_results(running, step, seqs, 0, false);
}

// Mixed steps (SchedulerOptions::mixed_steps): the weights are streamed once for both kinds of
// rows, instead of once for a decode step and again for a window step. Not with speculation (its
// decode step is a committed step of drafts) and not on the CPU by default (decode rows computed
// in a window step are not bit for bit those of a decode step).
bool Scheduler::mixes(const Running& running) const {
  if (!options_.mixed_steps || mtp_cache_) return false;
  bool decoding = false, prefilling = false;
  for (const auto& s : running) {
    if (s->done) continue;
    (s->prefilled < s->prompt_size() ? prefilling : decoding) = true;
  }
  return decoding && prefilling;
}

// One window step with every decoding sequence's row first (a one-token span at its position),
// then the prompt chunks plan_window picks. Each sequence's last row comes back: the decode rows'
// next tokens, the prompts' first ones.
void Scheduler::mixed(Running& running) {
  std::vector<Sequence*> seqs, chunks;
  Step step = plan_decode(running, seqs);
  step.phase = Phase::Window;
  const std::size_t decoding = seqs.size();
  const Step prompts = plan_window(running, chunks);
  step.sequences.insert(step.sequences.end(), prompts.sequences.begin(), prompts.sequences.end());
  seqs.insert(seqs.end(), chunks.begin(), chunks.end());
  // Only argmaxes come home when every row that gets a token wants only its argmax and no prompt
  // forks more choices from its last row.
  const bool argmax = std::all_of(seqs.begin(), seqs.end(), [](const Sequence* s) { return picks_argmax(*s) && s->forks_pending == 0; });
  if (!run_step(step, seqs, argmax)) return;
  {
    std::lock_guard lock(mutex_);
    ++totals_.mixed_steps;
  }
  for (std::size_t i = 0; i < decoding; ++i) {
    if (argmax) on_token(*seqs[i], SampledToken::picked(picks_[i]));
    else sample(*seqs[i], i);
  }
  window_results(running, step, seqs, decoding, argmax);
}

// After a step that holds prompt chunks from sequences seqs[first..] (step.sequences[first..]):
// each sequence's prompt advances, snapshots go to the prefix cache, and a prompt that is in
// forks its other choices and takes its first token from its last row (or from picks_ with
// `argmax`).
void Scheduler::window_results(Running& running, const Step& step, const std::vector<Sequence*>& seqs, std::size_t first, bool argmax) {
  {
    std::lock_guard lock(mutex_);
    for (std::size_t i = first; i < seqs.size(); ++i) totals_.prefill_tokens += static_cast<int64_t>(step.sequences[i].tokens.size());
  }
  const auto H = static_cast<std::size_t>(model_.config().hidden_size);
  std::size_t row = 0;  // the sequence's first hidden row in out_ (every row's with speculation)
  for (std::size_t i = first; i < seqs.size(); ++i) {
    Sequence& s = *seqs[i];
    const auto rows = step.sequences[i].tokens.size();
    const std::size_t last_row = i;  // logits: each sequence's last row
    const int64_t b = s.prefilled;
    s.prefilled += static_cast<int64_t>(rows);
    const int64_t n = s.prompt_size();
    if (s.drafter) {
      // The MTP block's prompt rows: (h_t, x_{t+1}); the last row's token is the first generated one.
      try {
        const auto& prompt = s.request.prompt;
        s.drafter->add_hidden(std::span<const float>(out_.hidden).subspan(row * H, rows * H));
        s.drafter->add_tokens(std::span<const int32_t>(prompt).subspan(static_cast<std::size_t>(b) + 1,
                                                                       static_cast<std::size_t>(std::min(n, s.prefilled + 1) - b - 1)));
        s.drafter->flush(options_.prefill_chunk, pool_);
      } catch (const std::exception& e) {
        row += rows;
        fail_step({&s}, e);
        continue;
      }
    }
    row += rows;
    if (prefix_.enabled() && (s.prefilled % options_.snapshot_interval == 0 || s.prefilled == (n - 1) / align_ * align_)) {
      const auto from = Clock::now();
      prefix_.insert(std::span<const int32_t>(s.request.prompt).first(static_cast<std::size_t>(s.prefilled)), s.slot);
      std::lock_guard lock(mutex_);
      totals_.snapshot_seconds += seconds_since(from);
    }
    if (s.prefilled < n) continue;
    for (Sequence* c : fork_choices(s, running)) {
      if (argmax) on_token(*c, SampledToken::picked(picks_[last_row]));
      else sample(*c, last_row);
      if (c->drafter && !c->done) c->drafter->add_tokens(std::span<const int32_t>(&c->output.back(), 1));
    }
  }
}

// The prompt of `s` is in: its other choices start from copies of it (slot forked: KV shared,
// state copied), all from its last row. Every choice, `s` first.
std::vector<Scheduler::Sequence*> Scheduler::fork_choices(Sequence& s, Running& running) {
  std::vector<Sequence*> choices{&s};
  for (int c = 1; c <= s.forks_pending; ++c) {
    auto sibling = std::make_unique<Sequence>(tokenizer_, s.request, s.handle, c);
    sibling->slot = cache_.acquire();
    cache_.fork(s.slot, sibling->slot);
    sibling->prefilled = s.prefilled;
    sibling->cached = s.cached;
    sibling->submitted = s.submitted;
    if (s.drafter) {
      sibling->mtp_slot = mtp_cache_->acquire();
      sibling->drafter = std::make_unique<MtpDrafter>(*s.drafter, sibling->mtp_slot);
    }
    choices.push_back(sibling.get());
    running.push_back(std::move(sibling));
  }
  s.forks_pending = 0;
  return choices;
}

bool Scheduler::run_step(const Step& step, const std::vector<Sequence*>& seqs, bool argmax) {
  if (seqs.empty()) return false;
  const auto from = Clock::now();
  try {
    if (options_.before_step) options_.before_step(step);
    if (argmax) {
      PendingStep pending = model_.enqueue_argmax(step, cache_, pool_, nullptr);
      model_.wait_argmax(pending, picks_);
    } else {
      model_.forward(step, cache_, pool_, out_);
    }
  } catch (const std::exception& e) {
    fail_step(seqs, e);
    return false;
  }
  int64_t rows = 0;
  for (const auto& sq : step.sequences) rows += static_cast<int64_t>(sq.tokens.size());
  std::lock_guard lock(mutex_);
  SchedulerStats::StepTime& kind = step.phase == Phase::Window ? totals_.window_steps : totals_.decode_steps;
  ++kind.steps;
  kind.rows += rows;
  kind.seconds += seconds_since(from);
  return true;
}

void Scheduler::sample(Sequence& s, std::size_t row) {
  const std::size_t V = static_cast<std::size_t>(model_.config().vocab_size);
  const std::span<const float> logits(out_.logits.data() + row * V, V);
  if (s.request.on_logits) s.request.on_logits(s.choice, logits);
  on_token(s, s.sampler.sample(logits, s.request.prompt, s.output));
}

void Scheduler::on_token(Sequence& s, const SampledToken& t) {
  const int32_t token = t.id;
  const auto now = Clock::now();
  {
    std::lock_guard lock(mutex_);
    ++totals_.generated_tokens;
    if (s.output.empty()) totals_.time_to_first_token.add(std::chrono::duration<double>(now - s.submitted).count());
    else totals_.inter_token_latency.add(std::chrono::duration<double>(now - s.last_token).count());
  }
  s.last_token = now;
  s.output.push_back(token);
  if (s.request.sampling.logprobs || s.request.sampling.top_logprobs > 0) {
    TokenLogprob lp{token, tokenizer_.token_bytes(token), t.logprob, {}};
    for (const auto& [id, logprob] : t.top) lp.top.push_back({id, tokenizer_.token_bytes(id), logprob});
    s.logprobs.push_back(std::move(lp));
  }
  const bool stop_id = std::find(s.request.stop_ids.begin(), s.request.stop_ids.end(), token) != s.request.stop_ids.end() ||
                       (!s.request.ignore_eos && std::find(stop_ids_.begin(), stop_ids_.end(), token) != stop_ids_.end());
  OutputDelta delta = s.text.push(token);
  if (s.text.stopped()) return finish(s, FinishReason::StopString, std::move(delta));
  if (stop_id) return finish(s, FinishReason::Stop, std::move(delta));
  if (static_cast<int64_t>(s.output.size()) >= s.request.max_tokens) return finish(s, FinishReason::Length, std::move(delta));
  if (!delta.empty()) {
    GenerationEvent e;
    e.choice = s.choice;
    e.delta = std::move(delta);
    e.logprobs = std::move(s.logprobs);
    s.logprobs.clear();
    e.prompt_tokens = s.prompt_size();
    e.cached_tokens = s.cached;
    s.handle->push(std::move(e));
  }
}

void Scheduler::finish(Sequence& s, FinishReason reason, OutputDelta delta, const std::string& error) {
  if (s.done) return;
  s.done = true;
  if (reason != FinishReason::Cancelled && reason != FinishReason::Error) delta.append(s.text.finish());
  if (reason == FinishReason::Stop && s.text.tool_call_count() > 0) reason = FinishReason::ToolCalls;
  GenerationEvent e;
  e.choice = s.choice;
  e.delta = std::move(delta);
  e.logprobs = std::move(s.logprobs);
  e.finished = true;
  e.finish = reason;
  if (reason == FinishReason::StopString) e.stop_string = s.text.stop_hit();
  e.error = error;
  e.prompt_tokens = s.prompt_size();
  e.completion_tokens = static_cast<int64_t>(s.output.size());
  e.cached_tokens = s.cached;
  // Choices never forked (the request ended before its prompt was in) end the same way.
  std::vector<GenerationEvent> unforked;
  for (int c = 1; c <= s.forks_pending; ++c) {
    GenerationEvent u;
    u.choice = s.choice + c;
    u.finished = true;
    u.finish = reason;
    u.error = error;
    u.prompt_tokens = e.prompt_tokens;
    u.cached_tokens = e.cached_tokens;
    unforked.push_back(std::move(u));
  }
  s.handle->push(std::move(e));
  for (auto& u : unforked) s.handle->push(std::move(u));
  finished_[static_cast<std::size_t>(reason)] += 1 + s.forks_pending;
  s.forks_pending = 0;
}

void Scheduler::fail_step(const std::vector<Sequence*>& seqs, const std::exception& e) {
  std::fprintf(stderr, "qwenrt scheduler: step failed: %s\n", e.what());
  {
    std::lock_guard lock(mutex_);
    ++totals_.failed_steps;
  }
  for (Sequence* s : seqs) finish(*s, FinishReason::Error, {}, e.what());
}

}  // namespace qwenrt
