#pragma once
// The options `run` and `chat` share: which model, and the sampling flags over a checkpoint's
// generation defaults.
#include <string>
#include <vector>

#include "backend/device.h"
#include "engine/sampled_generation.h"
#include "engine/sampler.h"

namespace qwenrt::cli {

class Options;

// --model, else $QWENRT_MODEL, else the demo model that ships in the repository (models/).
std::string resolve_model_dir(const Options& opt);

// The sampling flags shared by run and chat, and how they map onto SamplingParams.
const std::vector<std::string>& sampling_option_names();
void apply_sampling_options(const Options& opt, SamplingParams& params);

// --speculative mtp [--draft-tokens K] (valued) and --deterministic (a flag), shared by run, chat,
// generate, serve and bench (CPU and GPU alike). apply_speculation_options sets them on `gen`;
// require_mtp refuses a checkpoint without an MTP block.
const std::vector<std::string>& speculation_option_names();
inline const char* kDeterministicFlag = "deterministic";
void apply_speculation_options(const Options& opt, SampledGenerationOptions& gen);
void require_mtp(const Qwen35Model& model, const std::string& model_dir);

}  // namespace qwenrt::cli
