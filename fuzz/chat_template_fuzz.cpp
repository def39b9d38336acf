// libFuzzer target: arbitrary bytes as a chat template, parsed and rendered with a small fixed
// request. Either text or a qwenrt::Error (jinja::TemplateError, ChatRequestError); the render is
// bounded by smaller RenderLimits so that each input stays fast.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.h"
#include "text/jinja/chat_template.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const nlohmann::ordered_json request = nlohmann::ordered_json::parse(R"({
    "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi <b>&</b>"},
                 {"role": "assistant", "content": "", "reasoning_content": "think", "tool_calls": [{"function": {"name": "f", "arguments": {"x": [1, 2.5, null]}}}]},
                 {"role": "tool", "content": "42"}],
    "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
    "add_generation_prompt": true, "enable_thinking": false})");
  qwenrt::text::jinja::RenderLimits limits;
  limits.max_output_bytes = 1 << 20;
  limits.max_string_bytes = 1 << 20;
  limits.max_list_items = 1 << 16;
  limits.max_loop_iterations = 200000;
  try {
    const auto tmpl = qwenrt::text::ChatTemplate::parse(std::string(reinterpret_cast<const char*>(data), size));
    (void)tmpl.apply(request, {.eos_token = "<|im_end|>"}, limits);
  } catch (const qwenrt::Error&) {}
  return 0;
}
