// libFuzzer target: arbitrary bytes as tokenizer.json. Either a tokenizer that encodes and decodes
// a fixed text consistently (ids below vocab_size), or qwenrt::Error.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/error.h"
#include "text/tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::filesystem::path dir = [] {
    auto d = std::filesystem::temp_directory_path() / ("qwenrt_tokenizer_load_fuzz_" + std::to_string(getpid()));
    std::filesystem::create_directories(d);
    return d;
  }();
  const auto file = dir / "tokenizer.json";
  {
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  try {
    const auto tok = qwenrt::text::Tokenizer::load(file);
    const std::string text = "Hello, world! 你好 ü\n  x<|im_end|>";
    const auto ids = tok.encode(text);
    for (const int32_t id : ids) {
      if (id < 0 || id >= tok.vocab_size()) std::abort();
    }
    (void)tok.decode(ids);
  } catch (const qwenrt::Error&) {}
  return 0;
}
