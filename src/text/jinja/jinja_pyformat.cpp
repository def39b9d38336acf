// Python's repr/str of numbers and strings, as templates print values.
#include "text/jinja/jinja_pyformat.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "text/jinja/jinja_unicode.h"
#include "text/unicode/unicode_utf8.h"

namespace qwenrt::text::jinja {

std::string python_float_repr(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value < 0 ? "-inf" : "inf";
  // Shortest round-trip digits in scientific form, e.g. "1.2345e+02"; CPython's repr uses the same
  // shortest digit string (David Gay's algorithm), only the layout differs.
  char buf[64];
  auto result = std::to_chars(buf, buf + sizeof(buf), value, std::chars_format::scientific);
  std::string sci(buf, result.ptr);
  const bool negative = !sci.empty() && sci[0] == '-';
  if (negative) sci.erase(0, 1);
  const std::size_t e_pos = sci.find('e');
  std::string mantissa = sci.substr(0, e_pos);
  const int exponent = std::atoi(sci.c_str() + e_pos + 1);
  std::string digits;
  for (char c : mantissa) {
    if (c != '.') digits.push_back(c);
  }
  const int decpt = exponent + 1;  // position of the decimal point relative to the digits
  const int ndigits = static_cast<int>(digits.size());
  std::string out;
  if (negative) out.push_back('-');
  if (decpt > -4 && decpt <= 16) {
    if (decpt <= 0) {
      out += "0.";
      out.append(static_cast<std::size_t>(-decpt), '0');
      out += digits;
    } else if (decpt >= ndigits) {
      out += digits;
      out.append(static_cast<std::size_t>(decpt - ndigits), '0');
      out += ".0";
    } else {
      out += digits.substr(0, static_cast<std::size_t>(decpt));
      out += '.';
      out += digits.substr(static_cast<std::size_t>(decpt));
    }
    return out;
  }
  out += digits[0];
  if (ndigits > 1) {
    out += '.';
    out += digits.substr(1);
  }
  const int e = decpt - 1;
  char exp_buf[16];
  std::snprintf(exp_buf, sizeof(exp_buf), "e%c%02d", e < 0 ? '-' : '+', e < 0 ? -e : e);
  out += exp_buf;
  return out;
}

std::string python_string_repr(std::string_view utf8) {
  const std::u32string text = unicode::decode(utf8);
  bool has_single = false;
  bool has_double = false;
  for (char32_t c : text) {
    has_single |= c == U'\'';
    has_double |= c == U'"';
  }
  const char32_t quote = (has_single && !has_double) ? U'"' : U'\'';
  std::string out;
  out.reserve(utf8.size() + 2);
  out.push_back(static_cast<char>(quote));
  char buf[16];
  for (char32_t c : text) {
    if (c == quote || c == U'\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
    } else if (c == U'\t') {
      out += "\\t";
    } else if (c == U'\n') {
      out += "\\n";
    } else if (c == U'\r') {
      out += "\\r";
    } else if (c < 0x20 || c == 0x7F) {
      std::snprintf(buf, sizeof(buf), "\\x%02x", static_cast<unsigned>(c));
      out += buf;
    } else if (c < 0x7F) {
      out.push_back(static_cast<char>(c));
    } else if (unicode::is_printable(c)) {
      utf8::append(out, c);
    } else if (c <= 0xFF) {
      std::snprintf(buf, sizeof(buf), "\\x%02x", static_cast<unsigned>(c));
      out += buf;
    } else if (c <= 0xFFFF) {
      std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(c));
      out += buf;
    } else {
      std::snprintf(buf, sizeof(buf), "\\U%08x", static_cast<unsigned>(c));
      out += buf;
    }
  }
  out.push_back(static_cast<char>(quote));
  return out;
}

}  // namespace qwenrt::text::jinja
