// Python str semantics for the Jinja interpreter (code-point counts, whitespace, case mapping) from CPython tables.
#include "text/jinja/jinja_unicode.h"

#include <algorithm>

#include "text/jinja/jinja_unicode_tables.h"
#include "text/unicode/unicode_utf8.h"

namespace qwenrt::text::jinja::unicode {
namespace {

namespace tables = unicode_tables;

bool in_ranges(const tables::CodePointRange* ranges, std::size_t size, char32_t c) {
  const auto* end = ranges + size;
  const auto* it =
      std::upper_bound(ranges, end, static_cast<std::uint32_t>(c), [](std::uint32_t v, const tables::CodePointRange& r) { return v < r.first; });
  if (it == ranges) return false;
  --it;
  return c >= it->first && c <= it->last;
}

// Appends the case mapping of `c` (itself when the table has no entry).
void append_mapped(std::string& out, const tables::CaseMapping* table, std::size_t size, char32_t c) {
  const auto* end = table + size;
  const auto* it =
      std::lower_bound(table, end, static_cast<std::uint32_t>(c), [](const tables::CaseMapping& m, std::uint32_t v) { return m.code_point < v; });
  if (it != end && it->code_point == c) {
    out += it->utf8;
  } else {
    utf8::append(out, c);
  }
}

bool has_mapping(const tables::CaseMapping* table, std::size_t size, char32_t c) {
  const auto* end = table + size;
  const auto* it =
      std::lower_bound(table, end, static_cast<std::uint32_t>(c), [](const tables::CaseMapping& m, std::uint32_t v) { return m.code_point < v; });
  return it != end && it->code_point == c;
}

void append_upper(std::string& out, char32_t c) { append_mapped(out, tables::kUpper, tables::kUpper_size, c); }
void append_title(std::string& out, char32_t c) { append_mapped(out, tables::kTitle, tables::kTitle_size, c); }

// CPython's handle_capital_sigma: U+03A3 lowercases to final sigma U+03C2 when preceded by a cased
// letter and not followed by one (case-ignorable characters are skipped in both directions).
char32_t lower_sigma(const std::u32string& s, std::size_t i) {
  std::size_t j = i;
  char32_t c = 0;
  bool found = false;
  while (j > 0) {
    --j;
    c = s[j];
    if (!is_case_ignorable(c)) {
      found = true;
      break;
    }
  }
  bool final_sigma = found && is_cased(c);
  if (final_sigma && i + 1 < s.size()) {
    std::size_t k = i + 1;
    for (; k < s.size(); ++k) {
      c = s[k];
      if (!is_case_ignorable(c)) break;
    }
    final_sigma = k == s.size() || !is_cased(c);
  }
  return final_sigma ? U'\u03C2' : U'\u03C3';
}

void append_lower_at(std::string& out, const std::u32string& s, std::size_t i) {
  if (s[i] == U'\u03A3') {
    utf8::append(out, lower_sigma(s, i));
  } else {
    append_mapped(out, tables::kLower, tables::kLower_size, s[i]);
  }
}

}  // namespace

std::u32string decode(std::string_view text) { return utf8::decode_lossy(text); }

std::string encode(std::u32string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char32_t c : text) utf8::append(out, c);
  return out;
}

std::size_t code_point_count(std::string_view text) { return utf8::count_lossy(text); }

bool is_space(char32_t c) {
  switch (c) {
    case 0x09:
    case 0x0A:
    case 0x0B:
    case 0x0C:
    case 0x0D:
    case 0x1C:
    case 0x1D:
    case 0x1E:
    case 0x1F:
    case 0x20:
    case 0x85:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000: return true;
    default: return c >= 0x2000 && c <= 0x200A;
  }
}

bool is_line_break(char32_t c) {
  switch (c) {
    case 0x0A:
    case 0x0B:
    case 0x0C:
    case 0x0D:
    case 0x1C:
    case 0x1D:
    case 0x1E:
    case 0x85:
    case 0x2028:
    case 0x2029: return true;
    default: return false;
  }
}

bool is_printable(char32_t c) { return !in_ranges(tables::kNonPrintable, tables::kNonPrintable_size, c); }
bool is_cased(char32_t c) { return in_ranges(tables::kCased, tables::kCased_size, c); }
bool is_case_ignorable(char32_t c) { return in_ranges(tables::kCaseIgnorable, tables::kCaseIgnorable_size, c); }
bool is_decimal_digit(char32_t c) { return c >= '0' && c <= '9'; }

bool is_word_char(char32_t c) {
  if (c < 0x80) return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
  // Non-ASCII: treat cased letters and anything that is printable and not whitespace/punctuation-like as
  // part of a word. Python's \w is "alphanumeric"; CJK ideographs are uncased but alphanumeric.
  if (is_cased(c)) return true;
  return is_printable(c) && !is_space(c) && !(c >= 0x2000 && c <= 0x206F) && !(c >= 0x3000 && c <= 0x303F) && !(c >= 0xFF00 && c <= 0xFF0F) &&
         !(c >= 0xA0 && c <= 0xBF);
}

std::string upper(std::string_view utf8) {
  std::string out;
  out.reserve(utf8.size());
  for (char32_t c : decode(utf8)) append_upper(out, c);
  return out;
}

std::string lower(std::string_view utf8) {
  const std::u32string s = decode(utf8);
  std::string out;
  out.reserve(utf8.size());
  for (std::size_t i = 0; i < s.size(); ++i) append_lower_at(out, s, i);
  return out;
}

std::string title(std::string_view utf8) {
  const std::u32string s = decode(utf8);
  std::string out;
  out.reserve(utf8.size());
  bool previous_is_cased = false;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (previous_is_cased) {
      append_lower_at(out, s, i);
    } else {
      append_title(out, s[i]);
    }
    previous_is_cased = is_cased(s[i]);
  }
  return out;
}

std::string capitalize(std::string_view utf8) {
  const std::u32string s = decode(utf8);
  std::string out;
  out.reserve(utf8.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (i == 0) {
      append_title(out, s[i]);
    } else {
      append_lower_at(out, s, i);
    }
  }
  return out;
}

std::string swapcase(std::string_view utf8) {
  const std::u32string s = decode(utf8);
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (has_mapping(tables::kLower, tables::kLower_size, s[i])) {
      append_lower_at(out, s, i);
    } else {
      append_upper(out, s[i]);
    }
  }
  return out;
}

bool is_lower(std::string_view utf8) {
  bool cased = false;
  for (char32_t c : decode(utf8)) {
    if (!is_cased(c)) continue;
    // A cased character is lowercase when uppercasing changes it or it has no lowercase mapping of its
    // own (Lowercase property approximation that matches CPython for all Unicode 14 letters with
    // mappings; cased characters without any mapping are treated as lowercase, like U+00AA).
    if (has_mapping(tables::kLower, tables::kLower_size, c)) return false;
    cased = true;
  }
  return cased;
}

bool is_upper(std::string_view utf8) {
  bool cased = false;
  for (char32_t c : decode(utf8)) {
    if (!is_cased(c)) continue;
    if (!has_mapping(tables::kLower, tables::kLower_size, c)) return false;
    cased = true;
  }
  return cased;
}

}  // namespace qwenrt::text::jinja::unicode
