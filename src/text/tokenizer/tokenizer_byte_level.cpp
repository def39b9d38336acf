// The GPT-2 ByteLevel alphabet: byte <-> printable code point mapping of vocab strings.
#include "text/tokenizer/tokenizer_byte_level.h"

#include <array>

#include "text/unicode/unicode_utf8.h"

namespace qwenrt::text::byte_level {
namespace {

struct Tables {
  std::array<char32_t, 256> to_code_point{};
  std::array<int16_t, 324> to_byte{};  // indexed by code point; the alphabet ends at U+0143
};

const Tables& tables() {
  static const Tables t = [] {
    Tables out;
    out.to_byte.fill(-1);
    char32_t next_extra = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      const char32_t cp = printable ? static_cast<char32_t>(b) : next_extra++;
      out.to_code_point[static_cast<std::size_t>(b)] = cp;
      out.to_byte[cp] = static_cast<int16_t>(b);
    }
    return out;
  }();
  return t;
}

}  // namespace

char32_t byte_to_code_point(unsigned char byte) { return tables().to_code_point[byte]; }

std::optional<unsigned char> code_point_to_byte(char32_t cp) {
  const auto& t = tables();
  if (cp >= t.to_byte.size() || t.to_byte[cp] < 0) return std::nullopt;
  return static_cast<unsigned char>(t.to_byte[cp]);
}

std::optional<std::string> decode_token(std::string_view alphabet_text) {
  if (utf8::find_invalid(alphabet_text)) return std::nullopt;
  std::string out;
  out.reserve(alphabet_text.size());
  const char* p = alphabet_text.data();
  const char* end = p + alphabet_text.size();
  while (p < end) {
    const auto byte = code_point_to_byte(utf8::decode_valid(p));
    if (!byte) return std::nullopt;
    out.push_back(static_cast<char>(*byte));
  }
  return out;
}

}  // namespace qwenrt::text::byte_level
