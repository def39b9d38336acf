#pragma once
// The options `run` and `chat` share: which model, and the sampling flags over a checkpoint's
// generation defaults.
#include <string>
#include <vector>

#include "engine/sampler.h"

namespace qwenrt::cli {

class Options;

// --model, else $QWENRT_MODEL, else the demo model that ships in the repository (models/).
std::string resolve_model_dir(const Options& opt);

// The sampling flags shared by run and chat, and how they map onto SamplingParams.
const std::vector<std::string>& sampling_option_names();
void apply_sampling_options(const Options& opt, SamplingParams& params);

}  // namespace qwenrt::cli
