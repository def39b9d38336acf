// libFuzzer target: arbitrary bytes as a chat request (JSON), rendered with the released Qwen 3.5 chat
// template (tests/data/chat_template): depth check, parse, build_chat_context (the request -> template
// context conversion), render. Either text or a qwenrt::Error.
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>

#include "core/error.h"
#include "formats/json_file.h"
#include "text/jinja/chat_template.h"

namespace {
const qwenrt::text::ChatTemplate& qwen35() {
  static const qwenrt::text::ChatTemplate t = [] {
    std::ifstream in(QWENRT_SOURCE_DIR "/tests/data/chat_template/qwen3.5_chat_template.jinja", std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return qwenrt::text::ChatTemplate::parse(s.str());
  }();
  return t;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    qwenrt::check_json_depth(text, "fuzz request");
    const auto request = nlohmann::ordered_json::parse(text, nullptr, false);
    if (request.is_discarded() || !request.is_object()) return 0;
    (void)qwenrt::text::build_chat_context(request, {.eos_token = "<|im_end|>"});
    (void)qwen35().apply(request, {.eos_token = "<|im_end|>"});
  } catch (const qwenrt::Error&) {}
  return 0;
}
