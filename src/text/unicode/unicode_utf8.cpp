// UTF-8 validation, decoding and lossy repair (U+FFFD per maximal invalid subpart).
#include "text/unicode/unicode_utf8.h"

namespace qwenrt::text::utf8 {
namespace {

// Length of the well-formed sequence at `i`, or 0 with `subpart` set to the length of the
// maximal prefix that could still have been the start of a well-formed sequence (>= 1).
std::size_t sequence_length(std::string_view s, std::size_t i, std::size_t& subpart) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  subpart = 1;
  if (b0 < 0x80) return 1;
  std::size_t need;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte (Table 3-7)
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 3;
    if (b0 == 0xE0) lo = 0xA0;  // no overlongs
    if (b0 == 0xED) hi = 0x9F;  // no surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 4;
    if (b0 == 0xF0) lo = 0x90;  // no overlongs
    if (b0 == 0xF4) hi = 0x8F;  // nothing above U+10FFFF
  } else {
    return 0;
  }
  for (std::size_t k = 1; k < need; ++k) {
    if (i + k >= s.size()) return 0;
    const auto b = static_cast<unsigned char>(s[i + k]);
    const bool ok = k == 1 ? (b >= lo && b <= hi) : (b >= 0x80 && b <= 0xBF);
    if (!ok) return 0;
    subpart = k + 1;
  }
  return need;
}

}  // namespace

std::optional<std::size_t> find_invalid(std::string_view bytes) {
  std::size_t i = 0, subpart = 0;
  while (i < bytes.size()) {
    // ASCII fast path, eight bytes at a time.
    while (i + 8 <= bytes.size()) {
      unsigned char any_high = 0;
      for (int k = 0; k < 8; ++k) any_high |= static_cast<unsigned char>(bytes[i + k]);
      if (any_high & 0x80) break;
      i += 8;
    }
    if (i >= bytes.size()) break;
    const std::size_t n = sequence_length(bytes, i, subpart);
    if (n == 0) return i;
    i += n;
  }
  return std::nullopt;
}

void append(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

namespace {

// Walks `bytes` as well-formed sequences (valid(offset, length)) and maximal invalid subparts
// (invalid()), the unit of every lossy conversion below.
template <typename Valid, typename Invalid>
void walk_lossy(std::string_view bytes, Valid valid, Invalid invalid) {
  std::size_t i = 0, subpart = 0;
  while (i < bytes.size()) {
    const std::size_t n = sequence_length(bytes, i, subpart);
    if (n == 0) {
      invalid();
      i += subpart;
    } else {
      valid(i, n);
      i += n;
    }
  }
}

}  // namespace

std::u32string decode_lossy(std::string_view bytes) {
  std::u32string out;
  out.reserve(bytes.size());
  walk_lossy(
      bytes,
      [&](std::size_t i, std::size_t) {
        const char* p = bytes.data() + i;
        out.push_back(decode_valid(p));
      },
      [&] { out.push_back(U'\uFFFD'); });
  return out;
}

std::size_t count_lossy(std::string_view bytes) {
  std::size_t count = 0;
  walk_lossy(
      bytes, [&](std::size_t, std::size_t) { ++count; }, [&] { ++count; });
  return count;
}

std::string repair_lossy(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  walk_lossy(
      bytes, [&](std::size_t i, std::size_t n) { out.append(bytes.substr(i, n)); }, [&] { out += "\xEF\xBF\xBD"; });  // U+FFFD
  return out;
}

}  // namespace qwenrt::text::utf8
