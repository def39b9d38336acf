// UTF-8 validation, decoding and lossy repair for the tokenizer.
// Validation follows the Unicode definition (what Rust's str and Python accept): no overlong
// forms, no surrogates, nothing above U+10FFFF.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace qwenrt::text::utf8 {

// Byte offset of the first byte that does not start a well-formed sequence, or nullopt.
std::optional<std::size_t> find_invalid(std::string_view bytes);

// Decodes one code point from well-formed input and advances `p`. Callers validate first.
inline char32_t decode_valid(const char*& p) {
  const auto b0 = static_cast<unsigned char>(*p++);
  if (b0 < 0x80) return b0;
  auto next = [&p]() { return static_cast<char32_t>(static_cast<unsigned char>(*p++) & 0x3F); };
  if (b0 < 0xE0) return (static_cast<char32_t>(b0 & 0x1F) << 6) | next();
  if (b0 < 0xF0) {
    char32_t c = static_cast<char32_t>(b0 & 0x0F) << 12;
    c |= next() << 6;
    return c | next();
  }
  char32_t c = static_cast<char32_t>(b0 & 0x07) << 18;
  c |= next() << 12;
  c |= next() << 6;
  return c | next();
}

void append(std::string& out, char32_t cp);

// Bytes -> code points with the replacement rule of repair_lossy (each maximal invalid subpart
// becomes one U+FFFD), and the number of code points that gives, without building it.
std::u32string decode_lossy(std::string_view bytes);
std::size_t count_lossy(std::string_view bytes);

// Bytes -> valid UTF-8, replacing each maximal invalid subpart with U+FFFD. This is the
// Unicode "best practice" also used by Rust's String::from_utf8_lossy (HF decoders) and by
// Python's errors="replace" (the Qwen tokenizer_config `errors: replace`).
std::string repair_lossy(std::string_view bytes);

}  // namespace qwenrt::text::utf8
