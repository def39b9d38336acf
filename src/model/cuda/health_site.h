#pragma once
// The sites of a step's health word (backend/cuda/ptx/non_finite_probe.h) in the Qwen 3.5 graph,
// in the order a step reaches them: layer L's norm before its mixer (2L) and before its MLP
// (2L + 1), the final norm (2 · layers), the head (2 · layers + 1). A norm that finds its input not
// finite blames what wrote that input last: the layer before (or the embedding), or its own mixer.
#include <cstdint>

#include "model/config.h"
#include "model/step.h"

namespace qwenrt {

inline uint32_t final_norm_site(const ModelConfig& c) { return static_cast<uint32_t>(2 * c.num_layers); }
inline uint32_t head_site(const ModelConfig& c) { return final_norm_site(c) + 1; }

// Raises the step's non-finite error (model/non_finite.h) unless `word` is cuda::kStepHealthy.
// The head reports wanted rows (RowLayout::logit_rows' index), the norms step rows.
void check_step_health(unsigned long long word, const ModelConfig& config, const RowLayout& layout);

}  // namespace qwenrt
