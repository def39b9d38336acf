#pragma once
// A model ready for text: a checkpoint loaded with its tokenizer, chat template and generation
// defaults, and one turn of a conversation (template, tokenize, sample, stream, stop strings,
// reasoning split, tool calls) streamed to callbacks. What `run`, `chat` and the server share.
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "engine/sampled_generation.h"
#include "model/qwen35_model.h"
#include "text/jinja/chat_template.h"
#include "text/tokenizer/tokenizer.h"

namespace qwenrt {

struct TurnResult {
  std::string content, reasoning;
  nlohmann::ordered_json tool_calls = nlohmann::ordered_json::array();
  std::vector<int32_t> tokens;
  GenerationStats stats;
};

class TextSession {
 public:
  // Loads everything from `model_dir`; prints progress to stderr when `verbose`.
  TextSession(const std::string& model_dir, bool verbose, const DeviceSpec& device = {});
  // A model without a checkpoint's text files (`serve --synthetic`): `tokenizer` only turns generated
  // ids into bytes, there is no chat template (render_request throws Error) and no stop ids.
  TextSession(std::unique_ptr<Qwen35Model> model, text::Tokenizer tokenizer);

  const text::Tokenizer& tokenizer() const { return *tokenizer_; }
  // generation_config.json defaults (temperature, top_k, top_p, repetition_penalty), then flags.
  SamplingParams default_sampling() const { return defaults_; }

  // Renders `messages` with the chat template (generation prompt added), generates, and streams
  // answer text through `on_content` and reasoning through `on_reasoning` as it arrives.
  TurnResult turn(const nlohmann::ordered_json& messages, bool enable_thinking, const SampledGenerationOptions& options,
                  const std::function<void(const std::string&)>& on_content, const std::function<void(const std::string&)>& on_reasoning);

  std::string render(const nlohmann::ordered_json& messages, bool enable_thinking) const;
  // Renders a whole apply_chat_template request (messages, tools, add_generation_prompt,
  // enable_thinking, ...); Error naming the template's complaint.
  std::string render_request(const nlohmann::ordered_json& request) const;

  // What the server's scheduler builds on.
  const Qwen35Model& model() const { return *model_; }
  const std::vector<int32_t>& stop_ids() const { return stop_ids_; }

 private:
  std::unique_ptr<Qwen35Model> model_;
  std::unique_ptr<text::Tokenizer> tokenizer_;
  std::unique_ptr<text::ChatTemplate> template_;
  text::SpecialTokens special_;
  SamplingParams defaults_;
  std::vector<int32_t> stop_ids_;
};

}  // namespace qwenrt
