#pragma once
#include "model/cpu/block_context.h"
#include "model/weights.h"

namespace qwenrt {

// The gated attention mixer on the CPU (Ops::gated_attention): from the projections qg [T, 2·Nq·Dh]
// (per head Dh query then Dh gate columns), k and v [T, Nkv·Dh]: (1+w) q/k norms and partial
// rotate-half RoPE in place in qg and k, K/V written to the cache, causal softmax in f32 over the
// cached keys (GQA), sigmoid output gate, into attn [T, Nq·Dh]. `attn_layer` indexes the layer's
// KV in the cache.
void attention_mix(const BlockContext& ctx, const AttentionWeights& w, int attn_layer, float* qg, float* k, const float* v, float* attn);

// cos/sin of the rotary angles at `position` for rotary_dim/2 frequencies, computed as the
// reference does (f32 inverse frequencies, f32 angle).
void rope_angles(int64_t position, int64_t rotary_dim, double theta, float* cos, float* sin);

}  // namespace qwenrt
