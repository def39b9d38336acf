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

// Limits of tokenizer.json's pre_tokenizer: "Sequence" inside "Sequence" (the loader recurses), and
// the number of split stages (the splitter recurses once per stage, each with its own buffer). Real
// tokenizers use one Sequence level and 1-3 stages.
inline constexpr int kMaxPreTokenizerNesting = 64;
inline constexpr std::size_t kMaxPreTokenizerStages = 64;

struct SplitStage {
  Regex regex;
  bool remove_matches = false;  // behavior "Removed" (else "Isolated")
  bool invert = false;          // the pattern describes the gaps instead of the pieces
};

class PreTokenizer {
 public:
  PreTokenizer() = default;
  explicit PreTokenizer(std::vector<SplitStage> stages) : stages_(std::move(stages)) {}

  // Calls `emit` with each non-empty piece of `utf8` (well-formed), in order. The regex searches draw
  // on `budget` (one per encode call); without one, on a budget for `utf8` alone.
  void split(std::string_view utf8, const std::function<void(std::string_view)>& emit, RegexBudget* budget = nullptr) const;

  std::size_t stage_count() const { return stages_.size(); }
  const Regex& stage_regex(std::size_t i) const { return stages_[i].regex; }

 private:
  void split_stage(std::size_t stage, std::string_view utf8, const std::function<void(std::string_view)>& emit, RegexBudget& budget) const;

  std::vector<SplitStage> stages_;
};

}  // namespace qwenrt::text
