// libFuzzer target: arbitrary bytes as a pre-tokenizer split pattern (the first line), searched over
// the rest of the input. Either a compiled pattern whose matches lie inside the text and move
// forward, or a TokenizerError (qwenrt::Error).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "core/error.h"
#include "text/tokenizer/tokenizer_regex.h"
#include "text/unicode/unicode_utf8.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view all(reinterpret_cast<const char*>(data), size);
  const std::size_t nl = all.find('\n');
  const std::string_view pattern = all.substr(0, nl);
  std::string_view text = nl == std::string_view::npos ? std::string_view("Hello world's 123 ü  \n x") : all.substr(nl + 1);
  if (qwenrt::text::utf8::find_invalid(text)) text = "Hello world's 123 ü  \n x";
  try {
    const auto regex = qwenrt::text::Regex::compile(pattern);
    qwenrt::text::DecodedText decoded;
    decoded.assign(text);
    auto budget = qwenrt::text::RegexBudget::for_input(text.size());
    std::size_t search = 0;
    while (search <= decoded.size()) {
      const auto m = regex.find(decoded, search, budget);
      if (!m) break;
      if (m->begin < search || m->end < m->begin || m->end > decoded.size()) std::abort();
      search = m->end > m->begin ? m->end : m->end + 1;
    }
  } catch (const qwenrt::Error&) {}
  return 0;
}
