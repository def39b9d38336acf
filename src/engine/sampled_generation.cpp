#include "engine/sampled_generation.h"

#include <algorithm>
#include <chrono>
#include <limits>

#include "core/error.h"
#include "engine/step_queue.h"

namespace qwenrt {

namespace {
double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
}  // namespace

namespace {

// The speculative path: the same tokens, fewer main-model steps.
GenerationStats generate_speculative(const Qwen35Model& model, ModelCache& cache, int slot, const std::vector<int32_t>& prompt,
                                     const SampledGenerationOptions& opt, const std::function<bool(const SampledToken&)>& on_token,
                                     ThreadPool& pool) {
  if (cache.length(slot) != 0) fail("speculative decoding starts from an empty cache slot");
  ModelCache mtp_cache = model.new_mtp_cache(1);
  const int mtp_slot = mtp_cache.acquire();
  MtpSpeculator spec(model, cache, slot, mtp_cache, mtp_slot, opt.speculation, pool);
  Sampler sampler(opt.sampling);
  const SamplingParams& sp = opt.sampling;
  const bool argmax_only = sp.temperature == 0.0f && sp.repetition_penalty == 1.0f && sp.presence_penalty == 0.0f && sp.frequency_penalty == 0.0f &&
                           !sp.logprobs && sp.top_logprobs == 0;
  const int64_t V = model.config().vocab_size;
  GenerationStats st;
  st.speculative = true;
  st.prompt_tokens = static_cast<int64_t>(prompt.size());
  std::vector<int32_t> output;
  // Each emitted token, in order, exactly as plain decoding would pick it from the same logits.
  auto pick = [&](std::span<const float> logits) -> RowPick {
    const SampledToken tok = argmax_only ? SampledToken::picked(argmax_row(logits.data(), V))
                                         : sampler.sample(logits, prompt, output);
    output.push_back(tok.id);
    ++st.generated_tokens;
    const bool keep_going = on_token(tok);
    if (std::find(opt.stop_ids.begin(), opt.stop_ids.end(), tok.id) != opt.stop_ids.end()) st.finish = GenerationStats::Finish::StopId;
    else if (!keep_going) st.finish = GenerationStats::Finish::Callback;
    else if (st.generated_tokens < opt.max_tokens) return {tok.id, false};
    return {tok.id, true};
  };

  const double t0 = now_s();
  const std::span<const float> last = spec.prefill(prompt, opt.prefill_chunk);
  st.prefill_s = now_s() - t0;
  const double t1 = now_s();
  if (opt.max_tokens > 0) {
    const RowPick first = pick(last);
    bool stopped = first.stop;
    if (!stopped) spec.start(first.token);
    while (!stopped) spec.round(opt.max_tokens - st.generated_tokens, pick, stopped);
  }
  st.decode_s = now_s() - t1;
  st.speculation = spec.stats();
  return st;
}

}  // namespace

GenerationStats generate_sampled(const Qwen35Model& model, ModelCache& cache, int slot, const std::vector<int32_t>& prompt,
                                 const SampledGenerationOptions& opt, const std::function<bool(const SampledToken&)>& on_token, ThreadPool& pool) {
  if (prompt.empty()) fail("the prompt is empty");
  if (opt.prefill_chunk < 1) fail("prefill chunk must be at least 1");
  if (opt.deterministic) model.set_deterministic(true);
  if (opt.speculative) return generate_speculative(model, cache, slot, prompt, opt, on_token, pool);
  const int64_t V = model.config().vocab_size;
  const auto cached = static_cast<std::size_t>(cache.length(slot));
  if (cached >= prompt.size()) fail("internal: cache slot already holds ", cached, " rows for a ", prompt.size(), "-token prompt");
  Sampler sampler(opt.sampling);
  GenerationStats st;
  st.prompt_tokens = static_cast<int64_t>(prompt.size());

  // Temperature 0 without penalties or logprobs is the argmax of the raw logits: the model picks it
  // where the logits are (on a GPU only the token comes back, and the host scans nothing).
  const SamplingParams& sp = opt.sampling;
  const bool argmax_only = sp.temperature == 0.0f && sp.repetition_penalty == 1.0f && sp.presence_penalty == 0.0f && sp.frequency_penalty == 0.0f &&
                           !sp.logprobs && sp.top_logprobs == 0;
  std::vector<float> logits;
  std::vector<int32_t> picked;
  StepQueue queue(model, cache, pool);
  auto step = [&](const Step& s) {
    if (argmax_only) queue.run(s, picked);
    else model.forward(s, cache, pool, logits);
  };

  const double t0 = now_s();
  for (std::size_t b = cached, e = 0; b < prompt.size(); b = e) {
    const auto chunk = static_cast<std::size_t>(opt.prefill_chunk);
    e = std::min(prompt.size(), opt.deterministic ? (b / chunk + 1) * chunk : b + chunk);
    step({Phase::Window, {{slot, {prompt.begin() + static_cast<long>(b), prompt.begin() + static_cast<long>(e)}}}, false});
  }
  st.prefill_s = now_s() - t0;

  const double t1 = now_s();
  std::vector<int32_t> output;
  // Picks on the model's side run one step ahead of the host: the step that feeds a token is queued
  // (taking the pick on the device) before the token goes to on_token, so the callback and the
  // checks overlap the next step. A generation that stops then had that step computed for nothing.
  try {
    while (st.generated_tokens < opt.max_tokens) {
      if (argmax_only && st.generated_tokens + 1 < opt.max_tokens) {
        Step next{Phase::Decode, {{slot, {0}}}, false};
        next.sequences[0].from_previous = 0;
        queue.submit(next);
      }
      const SampledToken tok = argmax_only ? SampledToken::picked(picked[0])
                                           : sampler.sample({logits.data(), static_cast<std::size_t>(V)}, prompt, output);
      output.push_back(tok.id);
      ++st.generated_tokens;
      const bool keep_going = on_token(tok);
      if (std::find(opt.stop_ids.begin(), opt.stop_ids.end(), tok.id) != opt.stop_ids.end()) {
        st.finish = GenerationStats::Finish::StopId;
        break;
      }
      if (!keep_going) {
        st.finish = GenerationStats::Finish::Callback;
        break;
      }
      if (st.generated_tokens >= opt.max_tokens) break;
      if (argmax_only) {
        queue.collect(picked);
      } else {
        step({Phase::Decode, {{slot, {tok.id}}}, false});
      }
    }
  } catch (...) {
    queue.discard();
    throw;
  }
  queue.discard();
  st.decode_s = now_s() - t1;
  return st;
}

}  // namespace qwenrt
