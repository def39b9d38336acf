#include "cli/session_options.h"

#include <cstdint>
#include <cstdlib>
#include <filesystem>

#include "cli/options.h"
#include "core/error.h"

namespace qwenrt::cli {

std::string resolve_model_dir(const Options& opt) {
  if (opt.has("model")) return opt.str("model");
  if (const char* env = std::getenv("QWENRT_MODEL"); env && *env) return env;
  namespace fs = std::filesystem;
  // The build records where the source tree's demo model is; an installed tree keeps it beside bin/.
  std::vector<fs::path> candidates = {QWENRT_DEFAULT_MODEL_DIR};
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) candidates.push_back(exe.parent_path().parent_path() / "share/qwenrt/models" / fs::path(QWENRT_DEFAULT_MODEL_DIR).filename());
  for (const auto& c : candidates)
    if (fs::exists(c / "config.json")) return c.string();
  fail("no --model given, $QWENRT_MODEL is unset, and the demo model is not at ", candidates.front().string());
}

const std::vector<std::string>& sampling_option_names() {
  static const std::vector<std::string> names = {"temperature",       "top-k", "top-p", "min-p", "repeat-penalty", "presence-penalty",
                                                 "frequency-penalty", "seed"};
  return names;
}

void apply_sampling_options(const Options& opt, SamplingParams& p) {
  p.temperature = static_cast<float>(opt.number_or("temperature", p.temperature, 0.0, 100.0));
  p.top_k = static_cast<int32_t>(opt.integer_or("top-k", p.top_k, 0, 1 << 24));
  p.top_p = static_cast<float>(opt.number_or("top-p", p.top_p, 1e-9, 1.0));
  p.min_p = static_cast<float>(opt.number_or("min-p", p.min_p, 0.0, 1.0));
  p.repetition_penalty = static_cast<float>(opt.number_or("repeat-penalty", p.repetition_penalty, 1e-3, 100.0));
  p.presence_penalty = static_cast<float>(opt.number_or("presence-penalty", p.presence_penalty, -2.0, 2.0));
  p.frequency_penalty = static_cast<float>(opt.number_or("frequency-penalty", p.frequency_penalty, -2.0, 2.0));
  p.seed = static_cast<uint64_t>(opt.integer_or("seed", static_cast<int64_t>(p.seed), 0, INT64_MAX));
  p.validate();
}

const std::vector<std::string>& speculation_option_names() {
  static const std::vector<std::string> names = {"speculative", "draft-tokens"};
  return names;
}

void apply_speculation_options(const Options& opt, SampledGenerationOptions& gen) {
  if (opt.has("speculative")) {
    const std::string kind = opt.str("speculative");
    if (kind != "mtp") fail(opt.command(), ": --speculative takes 'mtp' (the checkpoint's multi-token-prediction block), not '", kind, "'");
    gen.speculative = true;
    gen.speculation.max_draft_tokens = static_cast<int>(opt.integer_or("draft-tokens", 3, 1, 16));
  } else if (opt.has("draft-tokens")) {
    fail(opt.command(), ": --draft-tokens needs --speculative mtp");
  }
  if (opt.flag(kDeterministicFlag)) gen.deterministic = true;
}

void require_mtp(const Qwen35Model& model, const std::string& model_dir) {
  if (!model.has_mtp())
    fail(model_dir, ": --speculative mtp needs the checkpoint's MTP block, and this one has no mtp.* tensors (mlx-lm conversions drop them)");
}

}  // namespace qwenrt::cli
