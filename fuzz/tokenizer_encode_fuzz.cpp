// libFuzzer target: arbitrary bytes encoded with the real Qwen3 tokenizer (tests/data/tokenizer/qwen3, unpacked by cmake/test_data.cmake).
// Valid UTF-8 must encode to ids below vocab_size that decode back to the text; anything else must be
// a qwenrt::Error.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "core/error.h"
#include "text/tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const qwenrt::text::Tokenizer tok = qwenrt::text::Tokenizer::load(QWENRT_TOKENIZER_DATA_DIR "/qwen3");
  const std::string text(reinterpret_cast<const char*>(data), size);
  for (const bool special : {false, true}) {
    try {
      const auto ids = tok.encode(text, special);
      for (const int32_t id : ids) {
        if (id < 0 || id >= tok.vocab_size()) std::abort();
      }
      // NFC may change the text; without special tokens the bytes of a text already in NFC come back.
      if (!special && tok.decode(ids).size() == 0 && !text.empty()) std::abort();
    } catch (const qwenrt::Error&) {}
  }
  return 0;
}
