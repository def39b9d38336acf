// qwenrt bench --speculative mtp -f FILE: greedy decode on segments of a text, plain and with MTP
// drafting, on the same prompts: tok/s of each, tokens per main-model step, acceptance per draft
// position. The two runs must give the same tokens (checked: a difference is an error).
#include <algorithm>
#include <chrono>
#include <random>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/bench_speculative.h"
#include "cli/options.h"
#include "cli/session_options.h"
#include "cli/synthetic_model.h"
#include "core/error.h"
#include "engine/sampled_generation.h"
#include "text/tokenizer/tokenizer.h"

namespace qwenrt::cli {

namespace {

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

struct Run {
  std::vector<int32_t> tokens;
  GenerationStats stats;
};

Run greedy_run(const Qwen35Model& model, const std::vector<int32_t>& prompt, const SampledGenerationOptions& gen) {
  ModelCache cache = model.new_cache(1);
  Run r;
  r.stats = generate_sampled(
      model, cache, cache.acquire(), prompt, gen,
      [&](const SampledToken& t) {
        r.tokens.push_back(t.id);
        return true;
      },
      ThreadPool::global());
  return r;
}

}  // namespace

int run_bench_speculative(const Options& opt, const DeviceSpec& device) {
  const bool synthetic = opt.has("synthetic");
  if (synthetic ? opt.has("model") || opt.has("file") : !opt.has("model") || !opt.has("file"))
    fail("bench --speculative mtp: give --model DIR and -f FILE (the text whose continuation is timed), or --synthetic SIZE [--accept-rate P]");
  if (opt.has("accept-rate") && !synthetic) fail("bench: --accept-rate goes with --synthetic (a checkpoint's drafts are accepted as they agree)");
  const std::string dir = synthetic ? "synthetic:" + opt.str("synthetic") : opt.str("model");
  SampledGenerationOptions spec;
  apply_speculation_options(opt, spec);
  spec.speculation.adaptive = !opt.flag("fixed-draft");
  // Random weights draft tokens that are never right; --accept-rate P accepts each with probability
  // P instead (the tokens are then not the model's: the run measures the mechanics).
  const bool forced = opt.has("accept-rate");
  if (forced) spec.speculation.forced_accept_rate = opt.number_or("accept-rate", 0.0, 0.0, 1.0);
  const int64_t P = opt.integer_or("prompt-tokens", 128, 2, 1 << 20);
  const int64_t G = opt.integer_or("gen-tokens", 64, 1, 1 << 20);
  const int64_t S = opt.integer_or("segments", synthetic ? 2 : 4, 1, 1 << 16);
  const int64_t repeats = opt.integer_or("repeats", synthetic ? 2 : 3, 1, 1000);
  Qwen35Model model = synthetic ? synthetic_model(opt.str("synthetic"), device, "bench") : Qwen35Model::load(dir);
  model.use_device(device);
  model.set_deterministic(spec.deterministic);
  require_mtp(model, dir);
  std::vector<std::vector<int32_t>> prompts;
  if (synthetic) {
    // Prompts: S random P-token segments (seeded).
    std::mt19937 rng(11);
    std::uniform_int_distribution<int32_t> tok(0, static_cast<int32_t>(model.config().vocab_size - 1));
    for (int64_t s = 0; s < S; ++s) {
      prompts.emplace_back();
      for (int64_t i = 0; i < P; ++i) prompts.back().push_back(tok(rng));
    }
  } else {
    const text::Tokenizer tokenizer = text::Tokenizer::load(dir);
    const std::string text = read_input_file(opt.str("file"), "bench: -f");
    require_utf8(text, "bench: the text file " + opt.str("file"));
    const std::vector<int32_t> ids = tokenizer.encode(text, /*allow_special=*/false);
    // Prompts: consecutive P-token segments of the text (the last may be shorter).
    for (std::size_t b = 0; b < ids.size() && static_cast<int64_t>(prompts.size()) < S; b += static_cast<std::size_t>(P))
      prompts.emplace_back(ids.begin() + static_cast<long>(b), ids.begin() + static_cast<long>(std::min(ids.size(), b + static_cast<std::size_t>(P))));
    if (prompts.empty()) fail("bench: ", opt.str("file"), " holds no tokens");
  }

  SampledGenerationOptions plain;
  plain.sampling.temperature = 0.0f;
  plain.max_tokens = G;
  plain.prefill_chunk = P;
  plain.deterministic = spec.deterministic;
  spec.sampling = plain.sampling;
  spec.max_tokens = G;
  spec.prefill_chunk = P;
  greedy_run(model, prompts[0], plain);  // untimed: buffers sized, pages touched

  double plain_s = 0, spec_s = 0;
  int64_t plain_tokens = 0, spec_tokens = 0;
  SpeculationStats total;
  total.drafted_at.assign(static_cast<std::size_t>(spec.speculation.max_draft_tokens) + 1, 0);
  total.accepted_at = total.drafted_at;
  // Each segment runs plain and speculative alternately `repeats` times; each mode's time is its
  // fastest run (the one least disturbed by whatever else the machine runs). The statistics are
  // those of the last speculative run (with a fixed draft length, every run's).
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    Run a, b;
    double best_a = 1e300, best_b = 1e300;
    for (int64_t r = 0; r < repeats; ++r) {
      a = greedy_run(model, prompts[i], plain);
      b = greedy_run(model, prompts[i], spec);
      if (!forced && a.tokens != b.tokens) fail("bench: segment ", i, ": speculative decoding gave other tokens than plain decoding (a bug)");
      best_a = std::min(best_a, a.stats.decode_s), best_b = std::min(best_b, b.stats.decode_s);
    }
    plain_s += best_a, spec_s += best_b;
    plain_tokens += a.stats.generated_tokens, spec_tokens += b.stats.generated_tokens;
    const SpeculationStats& s = b.stats.speculation;
    total.steps += s.steps, total.tokens += s.tokens, total.drafted += s.drafted, total.accepted += s.accepted;
    total.mtp_s += s.mtp_s, total.verify_s += s.verify_s;
    for (std::size_t k = 1; k < s.drafted_at.size(); ++k) total.drafted_at[k] += s.drafted_at[k], total.accepted_at[k] += s.accepted_at[k];
  }
  // What rollback costs: a verify step of K+1 rows plain, and with every row's DeltaNet state kept
  // and the slot cut back to its first row (the worst case: all drafts rejected).
  const int rows = spec.speculation.max_draft_tokens + 1;
  double verify_ms = 0, kept_ms = 0, truncate_ms = 0;
  {
    ModelCache cache = model.new_cache(2);
    const int a = cache.acquire(), b = cache.acquire();
    for (int s : {a, b}) model.forward({Phase::Window, {{s, prompts[0]}}, false}, cache, ThreadPool::global());
    const std::vector<int32_t> window(static_cast<std::size_t>(rows), prompts[0].back());
    const int reps = 10;
    StepOutput out;
    for (int r = 0; r < reps; ++r) {
      double t0 = now_s();
      model.forward({Phase::Committed, {{a, window}}, true, true}, cache, ThreadPool::global(), out);
      verify_ms += (now_s() - t0) * 1e3 / reps;
      const int64_t len = cache.length(b);
      t0 = now_s();
      cache.keep_row_states(b, rows);
      model.forward({Phase::Committed, {{b, window}}, true, true}, cache, ThreadPool::global(), out);
      const double t1 = now_s();
      cache.truncate(b, len + 1);  // the next rep verifies from one row further, as after a rejection
      truncate_ms += (now_s() - t1) * 1e3 / reps;
      kept_ms += (t1 - t0) * 1e3 / reps;
    }
  }

  std::vector<double> acceptance;
  for (std::size_t k = 1; k < total.drafted_at.size(); ++k)
    acceptance.push_back(total.drafted_at[k] ? static_cast<double>(total.accepted_at[k]) / static_cast<double>(total.drafted_at[k]) : 0.0);
  const double plain_rate = static_cast<double>(plain_tokens) / plain_s, spec_rate = static_cast<double>(spec_tokens) / spec_s;
  // Tokens per step counts the steps after the first token (which the prefill gives).
  const double per_step = total.steps ? static_cast<double>(total.tokens) / static_cast<double>(total.steps) : 0.0;

  nlohmann::ordered_json j;
  j["model"] = dir;
  j["device"] = model.device_description();
  if (!synthetic) j["file"] = opt.str("file");
  if (forced) j["forced_accept_rate"] = spec.speculation.forced_accept_rate;
  j["deterministic"] = spec.deterministic;
  j["threads"] = ThreadPool::global().size();
  j["segments"] = prompts.size();
  j["prompt_tokens"] = P;
  j["gen_tokens"] = G;
  j["repeats"] = repeats;
  j["draft_tokens"] = spec.speculation.max_draft_tokens;
  j["adaptive"] = spec.speculation.adaptive;
  j["identical_tokens"] = !forced;  // checked (a difference is an error); forced acceptance changes them
  j["decode_tok_s_plain"] = plain_rate;
  j["decode_tok_s_speculative"] = spec_rate;
  j["speedup"] = spec_rate / plain_rate;
  j["steps"] = total.steps;
  j["mean_tokens_per_step"] = per_step;
  j["mean_accepted_per_step"] = total.steps ? static_cast<double>(total.accepted) / static_cast<double>(total.steps) : 0.0;
  j["drafted"] = total.drafted;
  j["accepted"] = total.accepted;
  j["drafted_per_position"] = std::vector<int64_t>(total.drafted_at.begin() + 1, total.drafted_at.end());
  j["accepted_per_position"] = std::vector<int64_t>(total.accepted_at.begin() + 1, total.accepted_at.end());
  j["acceptance_per_position"] = acceptance;
  j["draft_s"] = total.mtp_s;
  j["verify_s"] = total.verify_s;
  j["rollback"] = {{"rows", rows},
                   {"kept_state_bytes", rows * model.new_cache(1).state_bytes_per_sequence()},
                   {"verify_ms", verify_ms},
                   {"verify_keeping_row_states_ms", kept_ms},
                   {"truncate_ms", truncate_ms}};
  if (opt.flag("json")) {
    std::printf("%s\n", j.dump().c_str());
    return 0;
  }
  std::printf("%s on %s (%s): %zu segments of %lld prompt tokens, %lld generated each, %d threads%s\n", dir.c_str(),
              synthetic ? "random prompts" : opt.str("file").c_str(), model.device_description().c_str(), prompts.size(), static_cast<long long>(P),
              static_cast<long long>(G), ThreadPool::global().size(), spec.deterministic ? ", deterministic" : "");
  if (forced)
    std::printf("each draft accepted with probability %.2f whatever the model says: this measures the mechanics, not a model\n",
                spec.speculation.forced_accept_rate);
  std::printf("plain decode        %.1f tok/s\n", plain_rate);
  std::printf("speculative (mtp)   %.1f tok/s (x%.2f), %.2f tokens per step, up to %d drafts%s%s\n", spec_rate, spec_rate / plain_rate, per_step,
              spec.speculation.max_draft_tokens, spec.speculation.adaptive ? ", adaptive" : "", forced ? "" : " (same tokens)");
  std::printf("acceptance by draft position:");
  for (std::size_t k = 0; k < acceptance.size(); ++k)
    std::printf(" %zu: %.2f (%lld/%lld)", k + 1, acceptance[k], static_cast<long long>(total.accepted_at[k + 1]),
                static_cast<long long>(total.drafted_at[k + 1]));
  std::printf("\n");
  std::printf("rollback: a %d-row verify step %.2f ms, %.2f ms keeping each row's DeltaNet state (%.1f KiB), truncate %.3f ms\n", rows, verify_ms,
              kept_ms, static_cast<double>(rows * model.new_cache(1).state_bytes_per_sequence()) / 1024.0, truncate_ms);
  return 0;
}

}  // namespace qwenrt::cli
