// libFuzzer target: arbitrary bytes as generation_config.json. Either a GenerationConfig whose every
// field is in its documented range (and whose ids pass or fail the vocabulary check consistently),
// or qwenrt::Error; any other exception or a crash is a finding.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "formats/generation_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  nlohmann::json j = nlohmann::json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return 0;
  try {
    const qwenrt::GenerationConfig g = qwenrt::parse_generation_config(j, "fuzz/generation_config.json");
    int32_t max_id = -1;
    for (int32_t id : g.eos_token_ids) {
      if (id < 0 || id > qwenrt::kMaxGenerationTokenId) std::abort();
      max_id = std::max(max_id, id);
    }
    if (g.eos_token_ids.size() > qwenrt::kMaxEosTokenIds) std::abort();
    for (const auto& id : {g.bos_token_id, g.pad_token_id}) {
      if (id && (*id < 0 || *id > qwenrt::kMaxGenerationTokenId)) std::abort();
      if (id) max_id = std::max(max_id, *id);
    }
    if (g.top_k && (*g.top_k < 0 || *g.top_k > qwenrt::kMaxGenerationTopK)) std::abort();
    if (g.temperature && !(*g.temperature >= 0 && *g.temperature <= 100)) std::abort();
    if (g.top_p && !(*g.top_p > 0 && *g.top_p <= 1)) std::abort();
    if (g.min_p && !(*g.min_p >= 0 && *g.min_p <= 1)) std::abort();
    if (g.repetition_penalty && !(*g.repetition_penalty > 0 && *g.repetition_penalty <= 100)) std::abort();
    // The vocabulary check accepts exactly when every id is below the size.
    for (int64_t vocab : {int64_t{1}, int64_t{151936}, int64_t{248320}}) {
      bool accepted = true;
      try {
        qwenrt::check_generation_token_ids(g, vocab, "fuzz/generation_config.json");
      } catch (const qwenrt::Error&) {
        accepted = false;
      }
      if (accepted != (max_id < vocab)) std::abort();
    }
  } catch (const qwenrt::Error&) {}
  return 0;
}
