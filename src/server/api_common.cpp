#include "server/api_common.h"

#include <chrono>
#include <random>

#include "core/error.h"
#include "engine/text_output.h"

namespace qwenrt::server {

void Collected::add(const GenerationEvent& e) {
  if (e.choice < 0 || e.choice > 4096) return;
  if (choices.size() <= static_cast<std::size_t>(e.choice)) choices.resize(static_cast<std::size_t>(e.choice) + 1);
  CollectedChoice& c = choices[static_cast<std::size_t>(e.choice)];
  c.content += e.delta.content;
  c.reasoning += e.delta.reasoning;
  for (const auto& t : e.delta.tool_calls) c.tool_calls.push_back(t);
  c.logprobs.insert(c.logprobs.end(), e.logprobs.begin(), e.logprobs.end());
  if (!e.finished) return;
  c.finish = e;
  const bool bad = e.finish == FinishReason::Error || e.finish == FinishReason::Cancelled;
  const bool was_bad = finish.finished && (finish.finish == FinishReason::Error || finish.finish == FinishReason::Cancelled);
  const int64_t tokens = finish.completion_tokens + e.completion_tokens;
  if (!finish.finished || (bad && !was_bad) || (e.choice == 0 && !was_bad)) finish = e;
  finish.completion_tokens = tokens;
}

namespace {
uint64_t random_u64() {
  static std::mutex m;
  static std::mt19937_64 rng{std::random_device{}()};
  std::lock_guard lock(m);
  return rng();
}
}  // namespace

void require_text(const ServedModel& model, const std::string& field) {
  if (!model.has_text)
    bad_field(field,
              "this server runs random weights (--synthetic) without a tokenizer or chat template: send token ids as the prompt of "
              "/v1/completions");
}

SamplingParams parse_sampling(const json& body, const ServedModel& model, double temperature_max) {
  SamplingParams p = model.session.default_sampling();
  if (auto v = get_number(body, "temperature", 0.0, temperature_max)) p.temperature = static_cast<float>(*v);
  if (auto v = get_number(body, "top_p", 0.0, 1.0)) {
    if (*v <= 0.0) bad_field("top_p", "must be greater than 0");
    p.top_p = static_cast<float>(*v);
  }
  if (auto v = get_int(body, "top_k", -1, 1 << 24)) p.top_k = static_cast<int32_t>(*v < 0 ? 0 : *v);  // -1: off (vLLM)
  if (auto v = get_number(body, "min_p", 0.0, 1.0)) p.min_p = static_cast<float>(*v);
  if (auto v = get_number(body, "presence_penalty", -2.0, 2.0)) p.presence_penalty = static_cast<float>(*v);
  if (auto v = get_number(body, "frequency_penalty", -2.0, 2.0)) p.frequency_penalty = static_cast<float>(*v);
  if (auto v = get_number(body, "repetition_penalty", 0.0, 100.0)) {
    if (*v <= 0.0) bad_field("repetition_penalty", "must be greater than 0");
    p.repetition_penalty = static_cast<float>(*v);
  }
  if (auto v = get_int(body, "seed", INT64_MIN, INT64_MAX)) p.seed = static_cast<uint64_t>(*v);
  else p.seed = random_u64();
  try {
    p.validate();
  } catch (const Error& e) {
    throw RequestError(400, "", e.what());
  }
  return p;
}

void render_chat(const json& request, const ServedModel& model, GenerationRequest& gen) {
  std::string text;
  try {
    text = model.session.render_request(request);
  } catch (const Error& e) {
    throw RequestError(400, "messages", e.what());
  }
  gen.prompt = model.session.tokenizer().encode(text);
  gen.output.starts_in_reasoning = prompt_opens_reasoning(text);
}

int64_t resolve_max_tokens(std::optional<int64_t> given, const std::string& field, const GenerationRequest& gen, const ServedModel& model,
                           int64_t fallback) {
  const int64_t prompt = static_cast<int64_t>(gen.prompt.size());
  const int64_t left = model.ctx_size - prompt;
  if (left < 1)
    throw RequestError(400, "messages",
                       "the prompt is " + std::to_string(prompt) + " tokens, the context " + std::to_string(model.ctx_size) + " (--ctx-size)");
  if (!given) return std::min(left, fallback);
  if (*given > left)
    bad_field(field, std::to_string(*given) + " tokens do not fit: the prompt is " + std::to_string(prompt) + " tokens of a " +
                         std::to_string(model.ctx_size) + "-token context");
  return *given;
}

std::string random_id(const std::string& prefix) {
  static const char* hex = "0123456789abcdef";
  std::string s = prefix;
  for (int half = 0; half < 2; ++half) {
    uint64_t r = random_u64();
    for (int i = 0; i < 12; ++i, r >>= 4) s += hex[r & 15];
  }
  return s;
}

int64_t unix_time() { return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count(); }

std::string arguments_string(const text::ToolCall& call) { return call.arguments.dump(); }

}  // namespace qwenrt::server
