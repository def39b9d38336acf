// A small backtracking regex engine for tokenizer pre-tokenizer patterns.
//
// tokenizer.json files give their split pattern as an Oniguruma regex (what Hugging Face
// tokenizers compiles). This engine implements the subset those patterns use, with Oniguruma's
// semantics: leftmost-first alternation, greedy/lazy quantifiers, (?:...), (?i:...) with
// simple case folding of literals, lookahead (?=...)/(?!...), character classes with ranges,
// negation and \p{..}/\P{..} general categories, \s/\S (White_Space), \d/\D (Nd), '.'.
// Anything else (anchors, backreferences, lookbehind, scripts, \w, nested classes, classes under
// (?i)) is rejected at compile time with a TokenizerError naming the construct, never guessed.
//
// The engine matches over decoded code points (TextView) so that class tests are a table
// lookup per character; repetitions of a single-character test run as one tight loop.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace qwenrt::text {

// Per-code-point attribute bits: bit c (0..29) for general category c, plus White_Space.
inline constexpr uint32_t kAttrWhiteSpace = 1u << 30;
uint32_t code_point_attributes(char32_t cp);

// A text decoded for matching: code points, their attribute bits, and byte offsets
// (byte_offsets has one extra entry: the total byte length).
struct DecodedText {
  std::vector<char32_t> code_points;
  std::vector<uint32_t> attributes;
  std::vector<uint32_t> byte_offsets;

  // `utf8` must be well-formed.
  void assign(std::string_view utf8);
  std::size_t size() const { return code_points.size(); }
};

// A guard against catastrophic backtracking: the number of backtracking steps (and start positions
// tried) one input may cost, summed over every search of every split stage of one encode call. It is
// proportional to the input, so linear-time patterns (all real tokenizer patterns: a few steps per
// character) never reach it, while a hostile pattern fails with an error instead of running for minutes.
inline constexpr uint64_t kRegexStepBase = 10'000'000;
inline constexpr uint64_t kRegexStepsPerByte = 256;

struct RegexBudget {
  uint64_t limit;
  uint64_t used = 0;
  // The budget of an input of `bytes` bytes: kRegexStepBase + kRegexStepsPerByte * bytes.
  static RegexBudget for_input(std::size_t bytes) { return RegexBudget{kRegexStepBase + kRegexStepsPerByte * static_cast<uint64_t>(bytes)}; }
};

struct RegexMatch {
  std::size_t begin;  // code point indices, end exclusive
  std::size_t end;
};

class Regex {
 public:
  // Throws TokenizerError on syntax errors and unsupported constructs.
  static Regex compile(std::string_view pattern);

  Regex(Regex&&) noexcept;
  Regex& operator=(Regex&&) noexcept;
  ~Regex();

  // The leftmost match starting at or after `from`, or nullopt. Throws TokenizerError naming the limit
  // when the search exceeds `budget` (shared by the searches of one input).
  std::optional<RegexMatch> find(const DecodedText& text, std::size_t from, RegexBudget& budget) const;
  // Same with a budget for this search alone (the rest of the text from `from`).
  std::optional<RegexMatch> find(const DecodedText& text, std::size_t from) const;

  const std::string& pattern() const;

  struct Program;  // compiled form, defined in tokenizer_regex.cpp

 private:
  explicit Regex(std::unique_ptr<Program> program);
  std::unique_ptr<Program> program_;
};

}  // namespace qwenrt::text
