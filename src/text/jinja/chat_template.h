// Chat templates: turning a chat request (messages, tools, flags) into the prompt text, exactly as
// Hugging Face transformers' tokenizer.apply_chat_template(..., tokenize=False) does with the same
// template. The template language is handled by the Jinja interpreter in jinja_*.{h,cpp}.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>

#include "core/error.h"
#include "text/jinja/jinja_template.h"

namespace qwenrt::text {

// Thrown for requests transformers would reject before or after rendering (Python ValueError/TypeError):
// no messages, a message that is not an object, continue_final_message misuse, ...
// A qwenrt::Error, so front ends report it as a user-facing error.
class ChatRequestError : public qwenrt::Error {
 public:
  using qwenrt::Error::Error;
};

// The named special tokens transformers passes to every template (tokenizer.special_tokens_map): only
// those that are set, as strings.
struct SpecialTokens {
  std::optional<std::string> bos_token, eos_token, unk_token, sep_token, pad_token, cls_token, mask_token;

  // Reads tokenizer_config.json entries, which are strings, null, or AddedToken objects {"content": ...}.
  static SpecialTokens from_tokenizer_config(const nlohmann::ordered_json& config);
};

// Builds the variables a template sees for `request`, mirroring apply_chat_template + render_jinja_template:
//   messages  <- request.messages with null-valued keys dropped and reasoning fields aliased
//                (reasoning_content / thinking / reasoning, as transformers does),
//   tools, documents <- as given, or None,
//   add_generation_prompt <- request value or false,
//   the special tokens, then every other request key (they override special tokens).
// apply_chat_template's own parameters (tokenize, return_dict, continue_final_message, chat_template, ...)
// are not template variables and are left out. A request nested deeper than jinja::kMaxValueDepth is a
// ChatRequestError (checked before anything is copied: copying JSON recurses).
nlohmann::ordered_json build_chat_context(const nlohmann::ordered_json& request, const SpecialTokens& tokens = {});

class ChatTemplate {
 public:
  // Throws jinja::TemplateError for malformed templates (with the template line).
  static ChatTemplate parse(std::string source);

  // Renders with exactly these variables (no request normalisation).
  std::string render(const nlohmann::ordered_json& context, const jinja::RenderLimits& limits = {}) const;

  // Renders a request like apply_chat_template(**request, tokenize=False), including
  // continue_final_message (true or a field name): the prompt ends inside the last message so the model
  // continues it. Throws ChatRequestError for invalid requests and jinja::TemplateError for template
  // errors (ErrorKind::Raised for raise_exception() calls; message() is the template's text).
  // `limits` bound the render (jinja_limits.h); exceeding one is a jinja::TemplateError naming it.
  std::string apply(const nlohmann::ordered_json& request, const SpecialTokens& tokens = {}, const jinja::RenderLimits& limits = {}) const;

  const std::string& source() const { return source_; }

 private:
  ChatTemplate(std::string source, jinja::Template compiled) : source_(std::move(source)), compiled_(std::move(compiled)) {}
  std::string source_;
  jinja::Template compiled_;
};

}  // namespace qwenrt::text
