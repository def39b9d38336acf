#pragma once
#include "model/block_context.h"
#include "model/weights.h"

namespace qwenrt {

// Gated full attention: q/gate split per head, (1+w) q/k norms, partial rotate-half RoPE, GQA,
// causal softmax in f32 over the cached keys, sigmoid output gate, o_proj. `attn_layer` indexes
// the layer's KV in the cache.
void attention_forward(const BlockContext& ctx, const AttentionWeights& w, int attn_layer, const float* x, float* out);

// cos/sin of the rotary angles at `position` for rotary_dim/2 frequencies, computed as the
// reference does (f32 inverse frequencies, f32 angle).
void rope_angles(int64_t position, int64_t rotary_dim, double theta, float* cos, float* sin);

}  // namespace qwenrt
