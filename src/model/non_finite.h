#pragma once
// The error a step raises when its activations stop being finite (a NaN or Inf weight, an
// overflow): where it first appeared, which sequence and position, and what to run next. Both
// backends detect it cheaply per step (the CPU on the residual stream, the GPU in its norms and
// argmax) and report it through here, with the same words.
#include <cstdint>

#include "model/config.h"
#include "model/step.h"

namespace qwenrt {

// `layer` is the layer whose output was first non-finite (-1: outside the layers; `what` says
// where: "embedding", "head"), `step_row` the step's row (RowLayout's numbering).
[[noreturn]] void fail_non_finite(const ModelConfig& config, const RowLayout& layout, int layer, const char* what, int64_t step_row);

}  // namespace qwenrt
