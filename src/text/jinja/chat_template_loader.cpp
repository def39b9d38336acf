// Reads a checkpoint's chat template(s) from chat_template.jinja, additional_chat_templates/ or tokenizer_config.json.
#include "text/jinja/chat_template_loader.h"

#include <fstream>
#include <sstream>
#include <stdexcept>

#include "core/error.h"
#include "formats/json_file.h"

namespace qwenrt::text {
namespace {

std::string read_file(const std::filesystem::path& path) {
  if (!std::filesystem::is_regular_file(path)) throw qwenrt::Error(path.string() + ": not a regular file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw qwenrt::Error("cannot read " + path.string());
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

}  // namespace

ChatTemplateSet ChatTemplateSet::from_tokenizer_config(const nlohmann::ordered_json& config) {
  ChatTemplateSet set;
  set.special_tokens_ = SpecialTokens::from_tokenizer_config(config);
  if (!config.contains("chat_template") || config["chat_template"].is_null()) return set;
  const auto& entry = config["chat_template"];
  if (entry.is_string()) {
    set.templates_["default"] = entry.get<std::string>();
  } else if (entry.is_array()) {
    for (const auto& item : entry) {
      if (!item.is_object() || !item.contains("name") || !item.contains("template") || !item["name"].is_string() || !item["template"].is_string()) {
        throw qwenrt::Error("tokenizer_config.json chat_template list entries need string 'name' and 'template'");
      }
      set.templates_[item["name"].get<std::string>()] = item["template"].get<std::string>();
    }
    set.multiple_ = true;
  } else {
    throw qwenrt::Error("tokenizer_config.json chat_template must be a string or a list of named templates");
  }
  return set;
}

ChatTemplateSet ChatTemplateSet::from_directory(const std::filesystem::path& dir) {
  ChatTemplateSet set;
  const auto config_path = dir / "tokenizer_config.json";
  if (std::filesystem::exists(config_path)) {
    nlohmann::ordered_json config;
    const std::string text = read_file(config_path);
    check_json_depth(text, config_path.string());
    try {
      config = nlohmann::ordered_json::parse(text);
    } catch (const nlohmann::json::exception& e) {
      throw qwenrt::Error("malformed " + config_path.string() + ": " + e.what());
    }
    set = from_tokenizer_config(config);
  }
  // Separate template files take priority over the config's entries (transformers' _from_pretrained).
  std::map<std::string, std::string> files;
  const auto jinja_path = dir / "chat_template.jinja";
  if (std::filesystem::exists(jinja_path)) files["default"] = read_file(jinja_path);
  const auto extra_dir = dir / "additional_chat_templates";
  if (std::filesystem::is_directory(extra_dir)) {
    for (const auto& entry : std::filesystem::directory_iterator(extra_dir)) {
      if (entry.is_regular_file() && entry.path().extension() == ".jinja") {
        files[entry.path().stem().string()] = read_file(entry.path());
      }
    }
  }
  if (!files.empty()) {
    set.multiple_ = !(files.size() == 1 && files.count("default"));
    set.templates_ = std::move(files);
  }
  return set;
}

const std::string& ChatTemplateSet::select(const std::optional<std::string>& name, bool has_tools) const {
  if (templates_.empty()) {
    throw qwenrt::Error("Cannot use chat template functions because tokenizer.chat_template is not set");
  }
  if (!multiple_) return templates_.begin()->second;  // a single template is used whatever name is asked for
  if (name) {
    auto it = templates_.find(*name);
    if (it == templates_.end()) throw qwenrt::Error("no chat template named '" + *name + "'");
    return it->second;
  }
  if (has_tools) {
    auto it = templates_.find("tool_use");
    if (it != templates_.end()) return it->second;
  }
  auto it = templates_.find("default");
  if (it != templates_.end()) return it->second;
  std::string names;
  for (const auto& [k, v] : templates_) names += (names.empty() ? "" : ", ") + k;
  throw qwenrt::Error("This model has multiple chat templates with no default specified! Available template names are " + names + ".");
}

}  // namespace qwenrt::text
