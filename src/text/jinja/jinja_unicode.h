// UTF-8 helpers and the Python str semantics the Jinja interpreter needs: Python strings are sequences
// of code points, so lengths, indices and slices count code points, and whitespace/case follow
// CPython's Unicode rules rather than the C locale.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace qwenrt::text::jinja::unicode {

// UTF-8 itself is text/unicode/unicode_utf8's: each maximal invalid subpart decodes to one U+FFFD, as
// Python's errors="replace" (inputs normally come from JSON, which is valid UTF-8).
std::u32string decode(std::string_view utf8);
std::string encode(std::u32string_view text);
std::size_t code_point_count(std::string_view utf8);  // decode(utf8).size()

bool is_space(char32_t c);       // str.isspace()
bool is_line_break(char32_t c);  // a boundary for str.splitlines()
bool is_printable(char32_t c);   // str.isprintable()
bool is_cased(char32_t c);
bool is_case_ignorable(char32_t c);
bool is_decimal_digit(char32_t c);  // ASCII digits only; see known gaps in jinja_methods.cpp
bool is_word_char(char32_t c);      // approximation of Python's regex \w: cased/letters, digits, '_'

std::string upper(std::string_view utf8);       // str.upper()
std::string lower(std::string_view utf8);       // str.lower() including the final-sigma rule
std::string title(std::string_view utf8);       // str.title()
std::string capitalize(std::string_view utf8);  // str.capitalize()
std::string swapcase(std::string_view utf8);    // str.swapcase()
bool is_lower(std::string_view utf8);           // str.islower()
bool is_upper(std::string_view utf8);           // str.isupper()

}  // namespace qwenrt::text::jinja::unicode
