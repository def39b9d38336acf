#pragma once
// The model's weights bound by role. Large matrices are views into the mapped checkpoint; small
// vectors (norms, gates, conv taps) are widened to f32 once at load, with the (1 + w) of the
// zero-centred norms folded in f32.
#include <memory>
#include <string>
#include <vector>

#include "backend/weight_matrix.h"
#include "model/config.h"

namespace qwenrt {

class CheckpointDir;

struct AttentionWeights {
  WeightMatrix q_proj;  // [2·Nq·Dh, H]: per head, Dh query rows then Dh gate rows
  WeightMatrix k_proj, v_proj;  // [Nkv·Dh, H]
  WeightMatrix o_proj;  // [H, Nq·Dh]
  std::vector<float> q_norm, k_norm;  // (1 + w), [Dh]
};

struct DeltaNetWeights {
  WeightMatrix in_qkv;  // [conv_dim, H]
  WeightMatrix in_z;    // [value_dim, H]
  WeightMatrix in_b;    // [nv, H]
  WeightMatrix in_a;    // [nv, H]
  WeightMatrix out_proj;  // [H, value_dim]
  std::vector<float> conv;     // [conv_dim, K]
  std::vector<float> dt_bias;  // [nv]
  std::vector<float> neg_exp_a;  // −exp(A_log), [nv]
  std::vector<float> norm;     // plain gated-norm weight, [dv]
};

struct MlpWeights {
  WeightMatrix gate, up;  // [I, H]
  WeightMatrix down;      // [H, I]
};

struct MoeWeights {
  WeightMatrix router;  // [E, H]
  std::vector<MlpWeights> experts;
  bool has_shared = false;
  MlpWeights shared;
  WeightMatrix shared_gate;  // [1, H]
};

struct LayerWeights {
  LayerKind kind;
  std::vector<float> input_norm, post_norm;  // (1 + w), [H]
  AttentionWeights attn;
  DeltaNetWeights gdn;
  MlpWeights mlp;
  MoeWeights moe;
};

struct ModelWeights {
  WeightMatrix embed;    // [V, H]
  WeightMatrix lm_head;  // [V, H]; the embedding when tied
  std::vector<float> final_norm;  // (1 + w), [H]
  std::vector<LayerWeights> layers;
  std::vector<std::string> mtp_tensors;  // kept for the MTP head (not used by the main forward)
  std::vector<std::shared_ptr<void>> owned;  // backing memory when not mapped (synthetic weights)

  std::size_t matrix_bytes() const;  // bytes of all matrices (what one decode step streams, head included)
};

// Binds every tensor the config implies, checking names, shapes and dtypes; any missing, extra or
// malformed tensor is an Error naming the file and tensor.
ModelWeights bind_weights(const ModelConfig& config, const CheckpointDir& checkpoint);

// Random weights with the real shapes of `config` (for benchmarks), bf16 matrices. Without
// host_matrices the matrices hold only their seeds and are made on the device at upload.
ModelWeights synthetic_weights(const ModelConfig& config, uint64_t seed, bool host_matrices = true);

}  // namespace qwenrt
