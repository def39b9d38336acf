#pragma once
// The op set the Qwen 3.5 graph (model/qwen35_graph.cpp) is written against, and that every
// backend implements for one step. Plain ops are pure virtual; the fused ones are members too, with
// their plain composition as the default here (ops.cpp), and a backend overrides one where it has a
// kernel computing the same math faster (norm inside the product, residual added by the product,
// gate/up with SwiGLU in one pass).
//
// Activations (Act) stay where the backend keeps them, in its element type; the graph only passes
// them along. An op's result lives in the backend's buffer for that Part until the next op of the
// same Part (the graph never needs it longer), so a step's memory does not grow with depth and the
// buffers a GPU graph captures are the same from step to step.
#include <cstdint>
#include <initializer_list>
#include <vector>

#include "backend/weight.h"
#include "model/weights.h"

namespace qwenrt {

// Which product or op an activation buffer belongs to (and how the profiler names its time).
enum class Part : uint8_t {
  Residual,        // the residual stream h [T, H] (f32)
  Norm,            // a normalised copy of h
  DeltaNetInProj,  // q|k|v, z, b, a
  DeltaNet,        // the DeltaNet mixer's output (before out_proj)
  DeltaNetOutProj,
  AttentionInProj,  // q|gate, k, v
  Attention,        // the attention mixer's output (before o_proj)
  AttentionOutProj,
  GateUp,  // gate and up (the plain path)
  SwiGlu,  // silu(gate) ⊙ up, the input of down
  Down,
  Moe,
  FinalNorm,         // the final norm of the rows whose logits are wanted (the hidden rows out)
  HiddenRows,        // the final norm of every row (Step::hidden_all)
  LmHead,            // logits
  MtpEmbeddingNorm,  // MTP: pre_fc_norm_embedding of the token embeddings
  MtpHiddenNorm,     // MTP: pre_fc_norm_hidden of the main model's hidden rows
  MtpConcat,         // MTP: [embedding | hidden], the input of fc
  MtpFc,             // MTP: fc's output, the MTP layer's residual stream
  kCount
};
const char* part_name(Part p);

enum class ActType : uint8_t { F32, BF16 };

// An activation matrix: rows × cols, row stride ld elements.
struct Act {
  void* data = nullptr;
  ActType type = ActType::F32;
  int64_t rows = 0, cols = 0, ld = 0;

  template <typename T>
  T* as() const {
    return static_cast<T*>(data);
  }
};

class Ops {
 public:
  virtual ~Ops() = default;

  // The graph is about to run layer `layer` (0-based). A hook for what a backend tracks per layer:
  // the CPU names the first layer whose residual is not finite.
  virtual void begin_layer(int layer) {}

  // ---- plain ops
  // The residual stream's first rows: each row's token embedding (or its given row), f32 [T, H].
  virtual Act embed() = 0;
  // RMSNorm(x) · w per row (w holds (1 + w) for the zero-centred norms).
  virtual Act rms_norm(Part part, const Act& x, const ParamVector& w) = 0;
  // x · Wᵢᵀ for each weight, one output each (side by side where the backend likes: it chooses).
  virtual std::vector<Act> matmul(Part part, const Act& x, std::initializer_list<const Weight*> weights) = 0;
  // h += y.
  virtual void add(Act& h, const Act& y) = 0;
  // silu(gate) ⊙ up.
  virtual Act swiglu(const Act& gate, const Act& up) = 0;
  // The DeltaNet mixer from its input projections: causal conv with the cached rows, SiLU, q/k
  // L2 norms, β = σ(b), g = −exp(A)·softplus(a + dt_bias), the gated delta rule from the cached
  // state (recurrence for decode and committed rows, chunked form for windows), gated RMSNorm with
  // silu(z). Updates the layer's conv and recurrent state in the cache.
  virtual Act gated_deltanet(const DeltaNetWeights& w, int gdn_layer, const Act& qkv, const Act& z, const Act& b, const Act& a) = 0;
  // The attention mixer from its input projections: (1 + w) q/k norms, partial RoPE at each row's
  // position, K/V appended to the cache, causal softmax attention over the cached rows, sigmoid
  // gate. `qg` holds per head Dh query columns then Dh gate columns.
  virtual Act gated_attention(const AttentionWeights& w, int attn_layer, const Act& qg, const Act& k, const Act& v) = 0;
  // Sparse MoE on normalised rows: router softmax, top-k renormalised, experts, gated shared expert.
  virtual Act moe(const MoeWeights& w, const Act& x) = 0;
  // RMSNorm(x) · w of the rows whose logits the step returns (RowLayout::logit_rows), in order.
  virtual Act norm_logit_rows(const Act& x, const ParamVector& w) = 0;
  // The step's final hidden rows: `logit_rows` (what norm_logit_rows gave), or with
  // RowLayout::hidden_all RMSNorm(x) · w of every row (each row's bits as norm_logit_rows gives them).
  virtual Act hidden_rows(const Act& x, const ParamVector& w, const Act& logit_rows) = 0;
  // MTP steps: the main model's hidden rows the step gives (StepSequence::hidden_in), f32 [T, H].
  // [a | b] side by side, [T, a.cols + b.cols]. A backend without the MTP block keeps these
  // defaults, which fail naming the op (the engine refuses speculation there first).
  virtual Act given_hidden();
  virtual Act concat(Part part, const Act& a, const Act& b);

  // ---- fused ops (plain composition by default)
  // x = RMSNorm(h) · w, then x · Wᵢᵀ for each weight.
  virtual std::vector<Act> norm_matmul(Part part, const Act& h, const ParamVector& w, std::initializer_list<const Weight*> weights);
  // h += x · Wᵀ.
  virtual void matmul_add(Part part, const Act& x, const Weight& w, Act& h);
  // silu(x · gateᵀ) ⊙ (x · upᵀ) with x = RMSNorm(h) · w.
  virtual Act norm_gate_up_swiglu(const Act& h, const ParamVector& w, const Weight& gate, const Weight& up);
  // h += MoE(x).
  virtual void moe_add(const MoeWeights& w, const Act& x, Act& h);
  // h += MoE(RMSNorm(h) · w).
  virtual void norm_moe_add(const ParamVector& w, const MoeWeights& moe, Act& h);
};

}  // namespace qwenrt
