// Finding a checkpoint's chat template(s) the way transformers' tokenizer loading does:
//   * chat_template.jinja (-> "default") and additional_chat_templates/<name>.jinja, if any exist,
//     replace whatever tokenizer_config.json says;
//   * otherwise tokenizer_config.json "chat_template": a string, or a list of {"name", "template"}.
// Selection follows tokenizer.get_chat_template: an explicit name, else "tool_use" when tools are
// passed and such a template exists, else "default".
#pragma once

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "text/jinja/chat_template.h"

namespace qwenrt::text {

class ChatTemplateSet {
 public:
  // Throws std::runtime_error on unreadable files or malformed JSON/entries.
  static ChatTemplateSet from_directory(const std::filesystem::path& checkpoint_dir);
  static ChatTemplateSet from_tokenizer_config(const nlohmann::ordered_json& config);

  bool empty() const { return templates_.empty(); }
  // Named templates; a single unnamed template is stored as "default".
  const std::map<std::string, std::string>& templates() const { return templates_; }
  // Special tokens from tokenizer_config.json (empty when there is none).
  const SpecialTokens& special_tokens() const { return special_tokens_; }

  // The template source transformers would use. Throws std::runtime_error when none applies.
  const std::string& select(const std::optional<std::string>& name = std::nullopt, bool has_tools = false) const;

 private:
  std::map<std::string, std::string> templates_;
  bool multiple_ = false;  // true when the checkpoint defines named templates (a dict in transformers)
  SpecialTokens special_tokens_;
};

}  // namespace qwenrt::text
