// libFuzzer target: arbitrary bytes as the body of a generation request to `qwenrt serve`, parsed
// into a GenerationRequest the way each route does it: OpenAI chat (/v1/chat/completions), OpenAI
// completion (/v1/completions) and Anthropic (/v1/messages), with the demo model's tokenizer and
// chat template. Each either gives a request within the model's context or a RequestError (a 400
// naming the field); anything else thrown would be a 500 and is a finding.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "engine/text_session.h"
#include "server/anthropic_api.h"
#include "server/openai_api.h"

namespace {

const qwenrt::server::ServedModel& served() {
  static const qwenrt::TextSession session(QWENRT_SOURCE_DIR "/models/qwen35-demo-16m", false);
  static const qwenrt::server::ServedModel model{session, "demo", 512, {}};
  return model;
}

void check(const qwenrt::server::ParsedRequest& r, const qwenrt::server::ServedModel& model) {
  const auto& g = r.gen;
  // What the scheduler's submit() would otherwise refuse (a 400 there, too, but parsing promises it).
  if (g.prompt.empty() || g.max_tokens < 1 || static_cast<int64_t>(g.prompt.size()) + g.max_tokens > model.ctx_size) __builtin_trap();
  const int64_t vocab = model.session.model().config().vocab_size;
  for (int32_t id : g.prompt)
    if (id < 0 || id >= vocab) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace qwenrt::server;
  const ServedModel& model = served();
  json body;
  try {
    body = parse_body(std::string_view(reinterpret_cast<const char*>(data), size));
  } catch (const RequestError&) {
    return 0;
  }
  try {
    check(openai::parse_chat(body, model), model);
  } catch (const RequestError&) {}
  try {
    check(openai::parse_completion(body, model), model);
  } catch (const RequestError&) {}
  try {
    check(anthropic::parse_messages(body, model), model);
  } catch (const RequestError&) {}
  return 0;
}
