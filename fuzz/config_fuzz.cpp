// libFuzzer target: arbitrary bytes as config.json. Either a validated ModelConfig (whose derived
// sizes are consistent) or qwenrt::Error.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "model/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  nlohmann::json j = nlohmann::json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return 0;
  try {
    const qwenrt::ModelConfig c = qwenrt::parse_model_config(j, "fuzz/config.json");
    if (static_cast<int64_t>(c.layer_types.size()) != c.num_layers) std::abort();
    if (c.rotary_dim <= 0 || c.rotary_dim > c.head_dim || c.rotary_dim % 2) std::abort();
    if (c.max_position_embeddings < 0 || c.max_position_embeddings > qwenrt::kMaxPositionEmbeddingsLimit) std::abort();
    if (c.num_heads % c.num_kv_heads || c.linear_num_value_heads % c.linear_num_key_heads) std::abort();
  } catch (const qwenrt::Error&) {}
  return 0;
}
