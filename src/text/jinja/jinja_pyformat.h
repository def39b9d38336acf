// Python's textual forms of numbers and strings, which a template exposes whenever it prints a value:
// {{ 0.1 }} prints repr(0.1), {{ [1, 'a'] }} prints the list's repr.
#pragma once

#include <string>
#include <string_view>

namespace qwenrt::text::jinja {

// repr(float): shortest round-trip digits, "1.0" for integral values, exponent form when the decimal
// exponent is < -4 or >= 16 ("1e-05", "1e+16"), "inf"/"-inf"/"nan".
std::string python_float_repr(double value);
// repr(str): single quotes unless the text contains ' but no ", backslash escapes for control and
// non-printable characters (\n, \x07, \u200b, ...), printable non-ASCII kept as is.
std::string python_string_repr(std::string_view utf8);

}  // namespace qwenrt::text::jinja
