// Unicode property and case-mapping tables generated from CPython (see
// tools/text/jinja_unicode_tables.py). They let the Jinja interpreter reproduce Python's str methods
// exactly; the generator records the CPython/Unicode version in the .cpp header.
#pragma once

#include <cstddef>
#include <cstdint>

namespace qwenrt::text::jinja::unicode_tables {

struct CodePointRange {
  std::uint32_t first;
  std::uint32_t last;  // inclusive
};

struct CaseMapping {
  std::uint32_t code_point;
  const char* utf8;  // the full mapping; may be several code points (e.g. U+00DF -> "SS")
};

// Sorted, non-overlapping.
extern const CodePointRange kNonPrintable[];  // not str.isprintable()
extern const std::size_t kNonPrintable_size;
extern const CodePointRange kCased[];
extern const std::size_t kCased_size;
extern const CodePointRange kCaseIgnorable[];
extern const std::size_t kCaseIgnorable_size;

// Sorted by code point; only code points whose mapping differs from themselves.
extern const CaseMapping kUpper[];
extern const std::size_t kUpper_size;
extern const CaseMapping kLower[];
extern const std::size_t kLower_size;
extern const CaseMapping kTitle[];
extern const std::size_t kTitle_size;

}  // namespace qwenrt::text::jinja::unicode_tables
