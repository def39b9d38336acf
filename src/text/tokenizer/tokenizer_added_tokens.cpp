// Finds added tokens in text, leftmost-longest as HF tokenizers does.
#include "text/tokenizer/tokenizer_added_tokens.h"

namespace qwenrt::text {

AddedTokenMatcher::AddedTokenMatcher(const std::vector<std::pair<std::string, int32_t>>& tokens) {
  for (const auto& [content, id] : tokens) {
    if (content.empty()) continue;
    int32_t node = 0;
    for (const char c : content) {
      const auto byte = static_cast<unsigned char>(c);
      int32_t next = child(node, byte);
      if (next < 0) {
        next = static_cast<int32_t>(nodes_.size());
        nodes_[static_cast<std::size_t>(node)].children.push_back({byte, next});
        nodes_.emplace_back();
      }
      node = next;
    }
    nodes_[static_cast<std::size_t>(node)].token_id = id;
    first_bytes_.set(static_cast<unsigned char>(content[0]));
  }
}

int32_t AddedTokenMatcher::child(int32_t node, unsigned char byte) const {
  for (const auto& [b, next] : nodes_[static_cast<std::size_t>(node)].children) {
    if (b == byte) return next;
  }
  return -1;
}

std::optional<AddedTokenMatcher::Hit> AddedTokenMatcher::find(std::string_view text, std::size_t from) const {
  if (empty()) return std::nullopt;
  for (std::size_t start = from; start < text.size(); ++start) {
    if (!first_bytes_.test(static_cast<unsigned char>(text[start]))) continue;
    int32_t node = 0;
    std::optional<Hit> best;
    for (std::size_t i = start; i < text.size(); ++i) {
      node = child(node, static_cast<unsigned char>(text[i]));
      if (node < 0) break;
      const int32_t id = nodes_[static_cast<std::size_t>(node)].token_id;
      if (id >= 0) best = Hit{start, i + 1, id};
    }
    if (best) return best;
  }
  return std::nullopt;
}

}  // namespace qwenrt::text
