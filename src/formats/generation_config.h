#pragma once
// generation_config.json as Hugging Face writes it: end-of-sequence ids and sampling defaults.
// Every field the engine uses is checked for type and range; unknown fields are ignored (the file
// carries many transformers-only settings), null means absent.
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace qwenrt {

struct GenerationConfig {
  std::vector<int32_t> eos_token_ids;  // "eos_token_id": an id or a list of ids
  std::optional<int32_t> bos_token_id, pad_token_id;
  std::optional<bool> do_sample;
  std::optional<double> temperature, top_p, min_p, repetition_penalty;
  std::optional<int32_t> top_k;
};

// Limits (see README "Limits"): token ids in [0, kMaxGenerationTokenId]; temperature in [0, 100];
// top_k in [0, kMaxGenerationTopK] (0: off); top_p in (0, 1]; min_p in [0, 1]; repetition_penalty
// in (0, 100]; at most kMaxEosTokenIds end-of-sequence ids.
inline constexpr int64_t kMaxGenerationTokenId = (int64_t{1} << 24) - 1;
inline constexpr int64_t kMaxGenerationTopK = int64_t{1} << 24;
inline constexpr std::size_t kMaxEosTokenIds = 1024;

// Throws Error naming `source` and the field, saying what is accepted.
GenerationConfig parse_generation_config(const nlohmann::json& j, const std::string& source);
GenerationConfig read_generation_config(const std::filesystem::path& file);

// Every id the config names (eos, bos, pad) must be below vocab_size: Error naming `source`.
void check_generation_token_ids(const GenerationConfig& g, int64_t vocab_size, const std::string& source);

}  // namespace qwenrt
