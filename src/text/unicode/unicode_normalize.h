// Unicode Normalization Form C, as the `{"type": "NFC"}` normalizer of tokenizer.json.
// Uses the tables of unicode_data.h, which follow Hugging Face tokenizers' NFC data exactly
// (see tools/text/make_unicode_tables.py), not the newest Unicode.
#pragma once

#include <string>
#include <string_view>

namespace qwenrt::text {

// True if `utf8` is certainly NFC already (quick check; no allocation). Most text is, so
// callers test this first and only copy when it fails.
bool is_nfc_quick(std::string_view utf8);

// The NFC form of well-formed UTF-8 input (validate before calling).
std::string to_nfc(std::string_view utf8);

}  // namespace qwenrt::text
