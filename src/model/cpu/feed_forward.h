#pragma once
#include "model/cpu/block_context.h"
#include "model/weights.h"

namespace qwenrt {

// SwiGLU MLP: down(silu(gate(x)) ⊙ up(x)) over `rows` rows.
void mlp_forward(const MlpWeights& w, const float* x, int64_t rows, float* out, ThreadPool& pool);

// Sparse MoE: f32 softmax router, top-k renormalised, experts run on the rows routed to them, plus
// the sigmoid-gated shared expert.
void moe_forward(const ModelConfig& c, const MoeWeights& w, const float* x, int64_t rows, float* out, ThreadPool& pool);

}  // namespace qwenrt
