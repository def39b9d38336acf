#include "model/released_shapes.h"

#include "core/error.h"

namespace qwenrt {

namespace {

struct Shape {
  const char* name;
  int64_t layers, hidden, intermediate, heads, kv_heads, value_heads;
  bool tied;
  int64_t experts, top_k, expert_inter, shared_inter;
  int64_t vocab = 248320;
};

// Qwen3.5-2B's value heads and tying are unverified upstream; 16 and tied follow the 0.8B.
constexpr Shape kShapes[] = {
    {"0.8b", 24, 1024, 3584, 8, 2, 16, true, 0, 0, 0, 0},   {"2b", 24, 2048, 6144, 8, 2, 16, true, 0, 0, 0, 0},
    {"4b", 32, 2560, 9216, 16, 4, 32, true, 0, 0, 0, 0},    {"9b", 32, 4096, 12288, 16, 4, 32, false, 0, 0, 0, 0},
    {"27b", 64, 5120, 17408, 24, 4, 48, false, 0, 0, 0, 0}, {"35b-a3b", 40, 2048, 0, 16, 2, 32, false, 256, 8, 512, 512},
    {"122b-a10b", 48, 3072, 0, 32, 2, 64, false, 256, 8, 1024, 1024},
    // Qwen3-Next-80B-A3B: the same blocks (reference/qwen35-model.md), its own vocabulary.
    {"next-80b-a3b", 48, 2048, 0, 16, 2, 32, false, 512, 10, 512, 512, 151936},
};

}  // namespace

std::vector<std::string> released_shape_names() {
  std::vector<std::string> names;
  for (const auto& s : kShapes) names.emplace_back(s.name);
  return names;
}

ModelConfig released_shape(const std::string& name) {
  for (const auto& s : kShapes) {
    if (name != s.name) continue;
    ModelConfig c;
    c.moe = s.experts > 0;
    c.architecture = c.moe ? "Qwen3_5MoeForConditionalGeneration" : "Qwen3_5ForConditionalGeneration";
    c.model_type = c.moe ? "qwen3_5_moe_text" : "qwen3_5_text";
    c.nested = true;
    c.vocab_size = s.vocab;
    c.hidden_size = s.hidden;
    c.num_layers = s.layers;
    c.intermediate_size = s.intermediate;
    c.rms_norm_eps = 1e-6;
    c.tie_word_embeddings = s.tied;
    for (int64_t i = 0; i < s.layers; ++i) c.layer_types.push_back((i + 1) % 4 == 0 ? LayerKind::FullAttention : LayerKind::LinearAttention);
    c.num_heads = s.heads;
    c.num_kv_heads = s.kv_heads;
    c.head_dim = 256;
    c.rotary_dim = 64;
    c.rope_theta = 1e7;
    c.linear_num_key_heads = 16;
    c.linear_num_value_heads = s.value_heads;
    c.linear_key_head_dim = c.linear_value_head_dim = 128;
    c.linear_conv_kernel = 4;
    c.num_experts = s.experts;
    c.experts_per_token = s.top_k;
    c.moe_intermediate_size = s.expert_inter;
    c.shared_expert_intermediate_size = s.shared_inter;
    c.mtp_layers = 1;
    c.max_position_embeddings = 262144;  // every released size (reference/qwen35-model.md)
    return c;
  }
  std::string names;
  for (const auto& n : released_shape_names()) names += (names.empty() ? "" : ", ") + n;
  fail("unknown synthetic model '", name, "' (known: ", names, ")");
}

}  // namespace qwenrt
