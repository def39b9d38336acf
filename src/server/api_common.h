#pragma once
// What every API's request parsing and response formatting share: the loaded model as requests see
// it, the parsed request, the events of one request gathered for a non-streaming answer, and ids.
#include <cstdint>
#include <string>
#include <vector>

#include "engine/scheduler.h"
#include "engine/text_session.h"
#include "server/json_fields.h"

namespace qwenrt::server {

struct ServeLimits {
  std::size_t max_messages = 4096;
  std::size_t max_stop_strings = 16;
  std::size_t max_tools = 256;
  int max_n = 16;  // choices of one request (the server sets --max-seqs)
};

struct ServedModel {
  const TextSession& session;
  std::string id;  // the model name requests see ("qwen35-demo")
  int64_t ctx_size = 8192;
  ServeLimits limits;
  bool has_text = true;  // false: random weights (serve --synthetic), token ids in, placeholder text out
};

// 400 naming `field` when the model has no tokenizer or chat template (serve --synthetic).
void require_text(const ServedModel& model, const std::string& field);

struct ParsedRequest {
  GenerationRequest gen;
  bool stream = false;
  bool include_usage = false;  // OpenAI stream_options.include_usage
};

// One choice of a non-streaming answer: its deltas put together, and its finish event.
struct CollectedChoice {
  std::string content, reasoning;
  std::vector<text::ToolCall> tool_calls;
  std::vector<TokenLogprob> logprobs;
  GenerationEvent finish;
};

// A non-streaming answer: every choice, and the request's outcome (`finish`: an Error or Cancelled
// choice's finish if any, else choice 0's; its completion_tokens summed over the choices).
struct Collected {
  std::vector<CollectedChoice> choices;
  GenerationEvent finish;
  void add(const GenerationEvent& e);
  // Choice 0 (the only one for n = 1).
  const CollectedChoice& first() const { return choices.at(0); }
};

// Sampling fields with OpenAI / vLLM names (temperature, top_p, top_k, min_p, presence_penalty,
// frequency_penalty, repetition_penalty, seed) over the model's generation defaults; `temperature_max`
// is 2 for OpenAI, 1 for Anthropic.
SamplingParams parse_sampling(const json& body, const ServedModel& model, double temperature_max);

// Renders a chat request (`request`: messages, tools, enable_thinking, ...) and tokenizes it into
// `gen` (prompt, reasoning start); template errors are a 400.
void render_chat(const json& request, const ServedModel& model, GenerationRequest& gen);

// max_tokens over the context: given, or what the context leaves after the prompt (`fallback`
// when smaller).
int64_t resolve_max_tokens(std::optional<int64_t> given, const std::string& field, const GenerationRequest& gen, const ServedModel& model,
                           int64_t fallback);

std::string random_id(const std::string& prefix);  // prefix + 24 hex digits
int64_t unix_time();

// A tool call's arguments as OpenAI sends them: a JSON string.
std::string arguments_string(const text::ToolCall& call);

}  // namespace qwenrt::server
