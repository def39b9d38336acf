// Finds added tokens (<|im_start|>, <think>, ...) in text: leftmost match, longest token at
// that position, as HF tokenizers' Aho-Corasick (MatchKind::LeftmostLongest) does. Matching is
// literal, anywhere in the text, with no word-boundary or whitespace-stripping rules.
#pragma once

#include <bitset>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace qwenrt::text {

class AddedTokenMatcher {
 public:
  struct Hit {
    std::size_t begin;  // byte offsets, end exclusive
    std::size_t end;
    int32_t id;
  };

  AddedTokenMatcher() = default;
  // Empty contents are ignored.
  explicit AddedTokenMatcher(const std::vector<std::pair<std::string, int32_t>>& tokens);

  bool empty() const { return nodes_.size() <= 1; }
  std::optional<Hit> find(std::string_view text, std::size_t from) const;

 private:
  struct Node {
    std::vector<std::pair<unsigned char, int32_t>> children;  // byte -> node index
    int32_t token_id = -1;
  };
  int32_t child(int32_t node, unsigned char byte) const;

  std::vector<Node> nodes_{Node{}};
  std::bitset<256> first_bytes_;
};

}  // namespace qwenrt::text
