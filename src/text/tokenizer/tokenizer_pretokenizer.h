// The pre-tokenizer: cuts normalized text into pieces that BPE encodes independently.
// Supports what byte-level BPE tokenizer.json files use: one or more regex Split stages
// (behaviour Isolated or Removed, optionally inverted) and ByteLevel, whose only effect on raw
// bytes is an optional GPT-2 regex split (the byte -> alphabet mapping is a no-op for an
// engine working on bytes).
#pragma once

#include <functional>
#include <string_view>
#include <vector>

#include "text/tokenizer/tokenizer_regex.h"

namespace qwenrt::text {

// The regex GPT-2's ByteLevel pre-tokenizer uses when "use_regex" is true.
inline constexpr std::string_view kGpt2SplitPattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

struct SplitStage {
  Regex regex;
  bool remove_matches = false;  // behavior "Removed" (else "Isolated")
  bool invert = false;          // the pattern describes the gaps instead of the pieces
};

class PreTokenizer {
 public:
  PreTokenizer() = default;
  explicit PreTokenizer(std::vector<SplitStage> stages) : stages_(std::move(stages)) {}

  // Calls `emit` with each non-empty piece of `utf8` (well-formed), in order.
  void split(std::string_view utf8, const std::function<void(std::string_view)>& emit) const;

  std::size_t stage_count() const { return stages_.size(); }
  const Regex& stage_regex(std::size_t i) const { return stages_[i].regex; }

 private:
  void split_stage(std::size_t stage, std::string_view utf8, const std::function<void(std::string_view)>& emit) const;

  std::vector<SplitStage> stages_;
};

}  // namespace qwenrt::text
