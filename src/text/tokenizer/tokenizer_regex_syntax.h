// Parser for the regex subset of tokenizer_regex.h: pattern text -> syntax tree.
#pragma once

#include <cstdint>
#include <limits>
#include <string_view>
#include <utility>
#include <vector>

namespace qwenrt::text::regex_syntax {

inline constexpr uint32_t kUnbounded = std::numeric_limits<uint32_t>::max();
// Nesting limits of a pattern (the parser, the compiler and the matcher's lookaheads recurse on it):
// groups inside groups, and the depth of the syntax tree (groups, quantifiers on quantifiers,
// alternations). Real split patterns nest 2-3 groups and stay below 10 tree levels.
inline constexpr int kMaxRegexGroupNesting = 256;
inline constexpr int kMaxRegexTreeDepth = 1024;

// A set of code points: explicit ranges, plus attribute masks (see code_point_attributes):
// a character is in the set if it is in a range, has any bit of `any_mask`, or lacks all bits
// of one of `lacks_masks` (that is how \S and \P{L} appear inside a class); then `negated`.
struct CharClass {
  std::vector<std::pair<char32_t, char32_t>> ranges;  // inclusive
  uint32_t any_mask = 0;
  std::vector<uint32_t> lacks_masks;
  bool negated = false;

  bool contains(char32_t cp, uint32_t attributes) const;
};

struct Node {
  enum class Kind { Empty, Literal, Class, Concat, Alternation, Repeat, Lookahead };
  Kind kind = Kind::Empty;
  char32_t literal = 0;       // Literal (already case-folded when `fold`)
  bool fold = false;          // Literal: compare case-insensitively
  int class_index = -1;       // Class
  std::vector<int> children;  // Concat, Alternation; Repeat/Lookahead have one
  uint32_t min = 0, max = 0;  // Repeat
  bool greedy = true;         // Repeat
  bool negative = false;      // Lookahead: (?!...)
};

struct Tree {
  std::vector<Node> nodes;
  std::vector<CharClass> classes;
  int root = -1;
};

// Throws TokenizerError (message quotes the pattern and the offending position).
Tree parse(std::string_view pattern);

// True if the subtree at `node` can match the empty string.
bool can_match_empty(const Tree& tree, int node);

}  // namespace qwenrt::text::regex_syntax
