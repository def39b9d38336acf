#pragma once
// Streaming detokenization: bytes in (one token at a time), text out that is always complete UTF-8
// and never the start of a stop string. Invalid sequences that can never complete are replaced by
// U+FFFD at once; an incomplete tail is held back until it completes or the stream ends.
#include <string>
#include <string_view>
#include <vector>

namespace qwenrt::text {

class TextStream {
 public:
  explicit TextStream(std::vector<std::string> stop_strings = {});

  // Appends bytes; returns the text now safe to show (possibly empty). After a stop string is hit,
  // returns the text before it and ignores everything after.
  std::string push(std::string_view bytes);
  // The held-back rest at the end of generation (an incomplete character becomes U+FFFD).
  std::string finish();

  bool stopped() const { return stopped_; }
  const std::string& stop_hit() const { return stop_hit_; }

 private:
  std::vector<std::string> stops_;
  std::string pending_;  // valid UTF-8 not yet emitted (may end in an incomplete character)
  bool stopped_ = false;
  std::string stop_hit_;
};

// Replaces ill-formed UTF-8 subparts with U+FFFD; `complete_only` leaves a trailing incomplete but
// so-far valid sequence out of the result and reports its length in `held`.
std::string sanitize_utf8(std::string_view bytes, bool complete_only, std::size_t* held = nullptr);

// Length of the longest suffix of `text` that is a proper prefix of one of `patterns`.
std::size_t partial_suffix_match(std::string_view text, const std::vector<std::string>& patterns);

}  // namespace qwenrt::text
