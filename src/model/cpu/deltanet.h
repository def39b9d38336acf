#pragma once
#include "model/cpu/block_context.h"
#include "model/weights.h"

namespace qwenrt {

// The Gated DeltaNet mixer on the CPU (Ops::gated_deltanet): from the input projections qkv
// [T, conv_dim], z [T, value_dim], b and a [T, nv] (b and a are turned into β and g in place) into
// o [T, value_dim]: causal conv with the cached rows, SiLU, q/k L2 norms, the delta rule per value
// head (chunked for windows, the recurrence otherwise), gated RMSNorm. `gdn_layer` indexes the
// layer's conv and recurrent state in the cache.
void deltanet_mix(const BlockContext& ctx, const DeltaNetWeights& w, int gdn_layer, const float* qkv, const float* z, float* b, float* a, float* o);

// The gated delta rule for one value head over `rows` tokens, from state S [dk, dv] (updated in
// place). q, k: row stride q_stride/k_stride, already normalised (q scaled); v: stride v_stride;
// o: stride o_stride. Exposed for the op tests.
struct DeltaRuleHead {
  const float* q;
  const float* k;
  const float* v;
  const float* beta;  // per row, stride gate_stride
  const float* g;     // log decay per row, stride gate_stride
  float* o;
  int64_t q_stride, k_stride, v_stride, o_stride, gate_stride;
  // Recurrent form only: when set, the state after each row t is copied to row_states + t·row_state_stride
  // (speculative verification keeps them to end the sequence after any row).
  float* row_states = nullptr;
  int64_t row_state_stride = 0;
};
// Both forms (delta_rule.cpp): AVX2 + FMA where the CPU has them, else a scalar twin with the same
// bits; `isa` forces one for the tests. Denormals are flushed for their duration.
enum class DeltaRuleIsa { Best, Avx2, Scalar };
void delta_rule_recurrent(const DeltaRuleHead& h, int64_t rows, int64_t dk, int64_t dv, float* state, DeltaRuleIsa isa = DeltaRuleIsa::Best);
void delta_rule_chunked(const DeltaRuleHead& h, int64_t rows, int64_t dk, int64_t dv, float* state, int64_t chunk = 64,
                        DeltaRuleIsa isa = DeltaRuleIsa::Best);

}  // namespace qwenrt
