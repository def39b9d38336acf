#pragma once
// The Qwen 3.5 text-model configuration, read from a Hugging Face config.json (flat, or nested
// under text_config for the conditional-generation checkpoints) and validated once.
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "cache/model_cache.h"

namespace qwenrt {

enum class LayerKind { LinearAttention, FullAttention };

// MLX affine quantization as mlx-lm writes it in config.json: "quantization" (top level or in
// text_config; "quantization_config" when "quantization" is absent) with default group_size/bits/mode
// and per-module entries keyed by module path (MLX naming): an object with its own bits/group_size,
// or false for a module left unquantized. Tensor presence decides which modules are quantized
// (<module>.scales); these parameters say how.
struct AffineSpec {
  int bits = 4;
  int group_size = 64;
};

// Qwen's FP8 checkpoints (transformers' "fine-grained FP8", as DeepSeek-V3 writes it):
// "quantization_config": {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
// "weight_block_size": [rows, cols], "modules_to_not_convert": [...]} at the top level or in
// text_config. A matrix is FP8 when its `weight` is F8_E4M3 with a sibling `weight_scale_inv`; the
// activations stay f32 (the weights are decoded in registers).
struct Fp8Config {
  bool present = false;
  int block_rows = 128, block_cols = 128;
  std::vector<std::string> modules_to_not_convert;
  std::string source;  // "config.json quantization_config", for errors

  // Whether modules_to_not_convert names `module`, matched as transformers does without regular
  // expressions: the entry is the module, a prefix of it up to a '.', or a suffix of it.
  bool not_converted(const std::string& module) const;
};

struct QuantizationConfig {
  Fp8Config fp8;
  bool present = false;  // MLX affine parameters below are given
  AffineSpec defaults;
  std::map<std::string, std::optional<AffineSpec>> modules;  // nullopt: the entry was false
  std::string source;                                        // "config.json quantization", for errors

  // The parameters of a module's quantized weight: its own entry or the defaults. Error (naming the
  // tensor) when the config has no quantization or the module's entry is false.
  AffineSpec spec_for(const std::string& module) const;
};

struct ModelConfig {
  std::string architecture;  // e.g. Qwen3_5ForConditionalGeneration
  std::string model_type;    // text model type, e.g. qwen3_5_text
  bool nested = false;       // config had text_config: weights live under model.language_model.
  bool moe = false;

  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t num_layers = 0;
  int64_t intermediate_size = 0;  // dense MLP width (0 for MoE)
  double rms_norm_eps = 1e-6;
  bool tie_word_embeddings = false;
  std::vector<LayerKind> layer_types;

  // Gated attention.
  int64_t num_heads = 0, num_kv_heads = 0, head_dim = 0, rotary_dim = 0;
  double rope_theta = 0;
  bool attn_output_gate = true;

  // Gated DeltaNet.
  int64_t linear_num_key_heads = 0, linear_num_value_heads = 0;
  int64_t linear_key_head_dim = 0, linear_value_head_dim = 0, linear_conv_kernel = 0;

  // MoE.
  int64_t num_experts = 0, experts_per_token = 0, moe_intermediate_size = 0, shared_expert_intermediate_size = 0;

  int64_t mtp_layers = 0;

  QuantizationConfig quantization;

  // The longest context the checkpoint was trained for (positions 0 .. max_position_embeddings-1):
  // "max_position_embeddings" in text_config or at the top level; 0 when the config does not say
  // (then only the engine's own limits apply). Released Qwen 3.5 configs give 262144.
  int64_t max_position_embeddings = 0;

  int64_t key_dim() const { return linear_num_key_heads * linear_key_head_dim; }
  int64_t value_dim() const { return linear_num_value_heads * linear_value_head_dim; }
  int64_t conv_dim() const { return 2 * key_dim() + value_dim(); }
  int64_t count(LayerKind kind) const;
  // The per-sequence state the cache keeps for this model.
  CacheShape cache_shape() const;
  std::string layer_pattern() const;  // e.g. "LLLA LLLA" (L = linear, A = full attention)
};

// The largest max_position_embeddings accepted (2^31 - 1: positions are 32-bit in the kernels).
inline constexpr int64_t kMaxPositionEmbeddingsLimit = (int64_t{1} << 31) - 1;

// Throws Error naming `source` and the offending field on anything missing or absurd.
ModelConfig parse_model_config(const nlohmann::json& config, const std::string& source);

}  // namespace qwenrt
