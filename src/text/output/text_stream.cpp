// Streaming detokenization: complete UTF-8 only, stop strings matched across chunks.
#include "text/output/text_stream.h"

#include <algorithm>

namespace qwenrt::text {

namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";

// Length of a well-formed UTF-8 sequence at s[i] (1..4), 0 if ill-formed, or −n if it is a valid
// but incomplete prefix of n bytes at the end of s. Follows the Unicode "maximal subpart" rule.
int sequence_length(std::string_view s, std::size_t i) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80) return 1;
  int need;
  unsigned char lo = 0x80, hi = 0xBF;
  if (b0 >= 0xC2 && b0 <= 0xDF) need = 1;
  else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 2;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 3;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  for (int k = 1; k <= need; ++k) {
    if (i + static_cast<std::size_t>(k) >= s.size()) return -k;  // ran out: incomplete, valid so far
    const auto b = static_cast<unsigned char>(s[i + static_cast<std::size_t>(k)]);
    if (b < (k == 1 ? lo : 0x80) || b > (k == 1 ? hi : 0xBF)) return -100 - k;  // ill-formed after k bytes
  }
  return need + 1;
}

}  // namespace

std::string sanitize_utf8(std::string_view s, bool complete_only, std::size_t* held) {
  std::string out;
  out.reserve(s.size());
  if (held) *held = 0;
  std::size_t i = 0;
  while (i < s.size()) {
    const int n = sequence_length(s, i);
    if (n > 0) {
      out.append(s.substr(i, static_cast<std::size_t>(n)));
      i += static_cast<std::size_t>(n);
    } else if (n == 0) {
      out.append(kReplacement);
      ++i;
    } else if (n > -100) {  // incomplete at the end
      if (complete_only) {
        if (held) *held = s.size() - i;
        return out;
      }
      out.append(kReplacement);
      return out;
    } else {  // maximal valid subpart replaced by one U+FFFD
      out.append(kReplacement);
      i += static_cast<std::size_t>(-n - 100);
    }
  }
  return out;
}

std::size_t partial_suffix_match(std::string_view text, const std::vector<std::string>& patterns) {
  std::size_t best = 0;
  for (const auto& p : patterns)
    for (std::size_t len = std::min(p.size() - (p.empty() ? 0 : 1), text.size()); len > best; --len)
      if (text.substr(text.size() - len) == std::string_view(p).substr(0, len)) {
        best = len;
        break;
      }
  return best;
}

TextStream::TextStream(std::vector<std::string> stop_strings) : stops_(std::move(stop_strings)) {
  std::erase_if(stops_, [](const std::string& s) { return s.empty(); });
}

std::string TextStream::push(std::string_view bytes) {
  if (stopped_) return {};
  pending_.append(bytes);
  // Earliest stop string wins; text before it is released, the rest dropped.
  std::size_t cut = std::string::npos;
  for (const auto& s : stops_)
    if (auto at = pending_.find(s); at != std::string::npos && at < cut) cut = at, stop_hit_ = s;
  if (cut != std::string::npos) {
    stopped_ = true;
    std::string out = sanitize_utf8(std::string_view(pending_).substr(0, cut), false);
    pending_.clear();
    return out;
  }
  std::size_t incomplete = 0;
  std::string text = sanitize_utf8(pending_, true, &incomplete);
  // Hold back what may begin a stop string (measured on the complete text) plus the incomplete tail.
  std::size_t hold = partial_suffix_match(text, stops_);
  std::size_t emit_raw = pending_.size() - incomplete;
  // The held text must be the raw bytes verbatim (it is, unless it contains a replaced byte).
  if (hold > 0 && (hold > emit_raw || pending_.compare(emit_raw - hold, hold, text, text.size() - hold, hold) != 0)) hold = 0;
  if (hold > 0) {
    // The held text is valid UTF-8 copied verbatim, so its bytes end the raw prefix too.
    text.resize(text.size() - hold);
    emit_raw -= hold;
  }
  pending_.erase(0, emit_raw);
  return text;
}

std::string TextStream::finish() {
  if (stopped_) return {};
  std::string out = sanitize_utf8(pending_, false);
  pending_.clear();
  return out;
}

}  // namespace qwenrt::text
