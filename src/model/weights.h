#pragma once
// The model's weights bound by role, one description for every backend. Large matrices are views
// into the mapped checkpoint in their own format; small vectors (norms, gates, conv taps) are
// widened to f32 once at load, with the (1 + w) of the zero-centred norms folded in f32. A backend
// that runs the model elsewhere records its copies in each Weight's and ParamVector's `bound`.
#include <memory>
#include <string>
#include <vector>

#include "backend/weight.h"
#include "model/config.h"

namespace qwenrt {

class CheckpointDir;

struct AttentionWeights {
  Weight q_proj;               // [2·Nq·Dh, H]: per head, Dh query rows then Dh gate rows
  Weight k_proj, v_proj;       // [Nkv·Dh, H]
  Weight o_proj;               // [H, Nq·Dh]
  ParamVector q_norm, k_norm;  // (1 + w), [Dh]
};

struct DeltaNetWeights {
  Weight in_qkv;          // [conv_dim, H]
  Weight in_z;            // [value_dim, H]
  Weight in_b;            // [nv, H]
  Weight in_a;            // [nv, H]
  Weight out_proj;        // [H, value_dim]
  ParamVector conv;       // [conv_dim, K]
  ParamVector dt_bias;    // [nv]
  ParamVector neg_exp_a;  // −exp(A_log), [nv]
  ParamVector norm;       // plain gated-norm weight, [dv]
};

struct MlpWeights {
  Weight gate, up;  // [I, H]
  Weight down;      // [H, I]
};

struct MoeWeights {
  Weight router;  // [E, H]
  std::vector<MlpWeights> experts;
  bool has_shared = false;
  MlpWeights shared;
  Weight shared_gate;  // [1, H]
};

struct LayerWeights {
  LayerKind kind;
  ParamVector input_norm, post_norm;  // (1 + w), [H]
  AttentionWeights attn;
  DeltaNetWeights gdn;
  MlpWeights mlp;
  MoeWeights moe;
};

// The multi-token-prediction block (mtp.*): row t reads the main model's final hidden row h_t
// (after the final norm) and the embedding of token t+1, and its logits predict token t+2:
//   u = fc(concat[RMSNorm(embed(x_{t+1}))·(1+w_e), RMSNorm(h_t)·(1+w_h)])   (embedding first)
//   u = one full-attention decoder layer(u) at position t (its own KV cache), then mtp.norm, head.
struct MtpWeights {
  bool present = false;
  Weight fc;                          // [H, 2H]
  ParamVector pre_fc_norm_embedding;  // (1 + w), [H]
  ParamVector pre_fc_norm_hidden;     // (1 + w), [H]
  ParamVector norm;                   // (1 + w), [H]
  LayerWeights layer;                 // full attention, dense MLP or MoE as the main layers
};

struct ModelWeights {
  Weight embed;            // [V, H]
  Weight lm_head;          // [V, H]; the embedding when tied
  ParamVector final_norm;  // (1 + w), [H]
  std::vector<LayerWeights> layers;
  MtpWeights mtp;                            // present when the checkpoint has mtp.* tensors
  std::vector<std::string> mtp_tensors;      // the names of the checkpoint's mtp.* tensors
  std::vector<std::shared_ptr<void>> owned;  // backing memory when not mapped (synthetic weights)

  std::size_t matrix_bytes() const;  // bytes of all matrices (what one decode step streams, head included)
};

// Binds every tensor the config implies, checking names, shapes and dtypes; any missing, extra or
// malformed tensor is an Error naming the file and tensor.
ModelWeights bind_weights(const ModelConfig& config, const CheckpointDir& checkpoint);

// The matrix format of synthetic weights: bf16, or random packed data with the layout of an
// mlx-community checkpoint (MLX affine 4 or 8 bits, g64, bf16 scales and biases, everything
// quantized, the MoE router and shared-expert gate at 8 bits) or of Qwen's FP8 release (e4m3 with
// bf16 scales per 128x128 block; embedding, head, in_proj_a/b, router and shared-expert gate bf16).
enum class SyntheticFormat { BF16, MlxQ4, MlxQ8, Fp8 };

// Random weights with the real shapes of `config` (for benchmarks). Without host_matrices the
// matrices hold only their seeds (and, quantized, their format's parameters) and are made on the
// device at upload.
ModelWeights synthetic_weights(const ModelConfig& config, uint64_t seed, bool host_matrices = true, SyntheticFormat format = SyntheticFormat::BF16);

}  // namespace qwenrt
