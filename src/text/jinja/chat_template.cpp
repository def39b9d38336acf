// Chat request -> template context (messages normalised as transformers does) and rendering; see chat_template.h.
#include "text/jinja/chat_template.h"

#include <array>

#include "text/jinja/jinja_unicode.h"

namespace qwenrt::text {
namespace {

using json = nlohmann::ordered_json;

// Parameters of apply_chat_template that are consumed by transformers rather than passed to the template.
constexpr std::array<const char*, 14> kApplyParameters = {
    "messages", "conversation", "tools",      "documents",  "chat_template",  "add_generation_prompt", "continue_final_message",
    "tokenize", "padding",      "truncation", "max_length", "return_tensors", "return_dict",           "return_assistant_tokens_mask"};

bool is_apply_parameter(const std::string& key) {
  for (const char* p : kApplyParameters) {
    if (key == p) return true;
  }
  return key == "tokenizer_kwargs" || key == "sanitize_control_tokens";
}

// Reasoning names transformers aliases; the first is the one templates read (_REASONING_FIELDS).
constexpr std::array<const char*, 3> kReasoningFields = {"reasoning_content", "thinking", "reasoning"};

// _normalize_chat_messages + _alias_reasoning_fields.
json normalize_messages(const json& messages) {
  if (!messages.is_array()) throw ChatRequestError("'messages' must be a list of message objects");
  json out = json::array();
  for (const auto& message : messages) {
    if (!message.is_object()) {
      throw ChatRequestError("Chat messages should be dicts, dataclasses or pydantic models, but got " + message.dump() + ".");
    }
    json cleaned = json::object();
    for (const auto& [k, v] : message.items()) {
      if (!v.is_null()) cleaned[k] = v;  // APIs send content=None / tool_calls=None; templates expect absence
    }
    const json* reasoning = nullptr;
    for (const char* field : kReasoningFields) {
      if (cleaned.contains(field)) {
        reasoning = &cleaned[field];
        break;
      }
    }
    if (reasoning) {
      // {"thinking": reasoning, **message, "reasoning_content": reasoning}: key order matters for tojson.
      const json value = *reasoning;
      json aliased = json::object();
      aliased["thinking"] = value;
      for (const auto& [k, v] : cleaned.items()) aliased[k] = v;
      aliased["reasoning_content"] = value;
      cleaned = std::move(aliased);
    }
    out.push_back(std::move(cleaned));
  }
  return out;
}

json list_of_objects_or_null(const json& request, const char* key, const char* what) {
  if (!request.contains(key) || request[key].is_null()) return nullptr;
  const json& v = request[key];
  if (!v.is_array()) throw ChatRequestError(std::string("'") + key + "' must be a list of " + what);
  for (const auto& item : v) {
    if (!item.is_object()) throw ChatRequestError(std::string("each entry of '") + key + "' must be an object (" + what + ")");
  }
  return v;
}

std::string python_strip(const std::string& s) {
  const std::u32string cps = jinja::unicode::decode(s);
  std::size_t b = 0;
  std::size_t e = cps.size();
  while (b < e && jinja::unicode::is_space(cps[b])) ++b;
  while (e > b && jinja::unicode::is_space(cps[e - 1])) --e;
  return jinja::unicode::encode(cps.substr(b, e - b));
}

std::string python_rstrip(const std::string& s) {
  std::u32string cps = jinja::unicode::decode(s);
  while (!cps.empty() && jinja::unicode::is_space(cps.back())) cps.pop_back();
  return jinja::unicode::encode(cps);
}

// Whether `j` nests arrays/objects more than `limit` levels; recurses at most limit + 1 deep.
bool json_deeper_than(const json& j, int limit) {
  if (!j.is_structured()) return false;
  if (limit <= 0) return true;
  for (const auto& child : j) {
    if (json_deeper_than(child, limit - 1)) return true;
  }
  return false;
}

}  // namespace

SpecialTokens SpecialTokens::from_tokenizer_config(const json& config) {
  SpecialTokens tokens;
  auto read = [&config](const char* key) -> std::optional<std::string> {
    if (!config.contains(key)) return std::nullopt;
    const json& v = config[key];
    if (v.is_string()) return v.get<std::string>();
    if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
    return std::nullopt;
  };
  tokens.bos_token = read("bos_token");
  tokens.eos_token = read("eos_token");
  tokens.unk_token = read("unk_token");
  tokens.sep_token = read("sep_token");
  tokens.pad_token = read("pad_token");
  tokens.cls_token = read("cls_token");
  tokens.mask_token = read("mask_token");
  return tokens;
}

json build_chat_context(const json& request, const SpecialTokens& tokens) {
  if (!request.is_object()) throw ChatRequestError("the chat request must be a JSON object");
  if (json_deeper_than(request, jinja::kMaxValueDepth)) {
    throw ChatRequestError("the chat request nests arrays and objects more than " + std::to_string(jinja::kMaxValueDepth) +
                           " levels deep (limit jinja::kMaxValueDepth)");
  }
  const json* messages = request.contains("messages") ? &request["messages"] : nullptr;
  if (!messages && request.contains("conversation")) messages = &request["conversation"];
  if (!messages) throw ChatRequestError("the chat request has no 'messages'");
  if (messages->is_array() && messages->empty()) {
    throw ChatRequestError("Cannot apply chat template to an empty conversation. Provide at least one message.");
  }
  json context = json::object();
  context["messages"] = normalize_messages(*messages);
  context["tools"] = list_of_objects_or_null(request, "tools", "JSON schemas");
  context["documents"] = list_of_objects_or_null(request, "documents", "documents with 'title' and 'text'");
  context["add_generation_prompt"] = request.value("add_generation_prompt", json(false));
  const std::pair<const char*, const std::optional<std::string>*> named[] = {
      {"bos_token", &tokens.bos_token}, {"eos_token", &tokens.eos_token}, {"unk_token", &tokens.unk_token},  {"sep_token", &tokens.sep_token},
      {"pad_token", &tokens.pad_token}, {"cls_token", &tokens.cls_token}, {"mask_token", &tokens.mask_token}};
  for (const auto& [name, value] : named) {
    if (*value) context[name] = **value;
  }
  for (const auto& [k, v] : request.items()) {
    if (!is_apply_parameter(k)) context[k] = v;
  }
  return context;
}

ChatTemplate ChatTemplate::parse(std::string source) {
  jinja::Template compiled = jinja::Template::parse(source);
  return ChatTemplate(std::move(source), std::move(compiled));
}

std::string ChatTemplate::render(const json& context, const jinja::RenderLimits& limits) const { return compiled_.render(context, limits); }

std::string ChatTemplate::apply(const json& request, const SpecialTokens& tokens, const jinja::RenderLimits& limits) const {
  json context = build_chat_context(request, tokens);
  const json continue_final = request.value("continue_final_message", json(false));
  const bool continuing = continue_final.is_string() || (continue_final.is_boolean() && continue_final.get<bool>());
  if (!continuing) return compiled_.render(context, limits);

  if (context["add_generation_prompt"].is_boolean() && context["add_generation_prompt"].get<bool>()) {
    throw ChatRequestError(
        "continue_final_message and add_generation_prompt are not compatible. Use continue_final_message when you "
        "want the model to continue the final message, and add_generation_prompt when you want to add a header "
        "that will prompt it to start a new assistant message instead.");
  }
  // transformers appends a marker to the final message, renders, and cuts the prompt at the marker.
  static const std::string kTag = "CONTINUE_FINAL_MESSAGE_TAG ";
  const std::string field = continue_final.is_string() ? continue_final.get<std::string>() : "content";
  json& last = context["messages"].back();
  if (!last.contains(field)) {
    throw ChatRequestError("continue_final_message is set but the final message has no \"" + field + "\" to continue!");
  }
  const json final_value = last[field];
  std::vector<std::string> fields = {field};
  if (field == "reasoning_content" || field == "thinking" || field == "reasoning") {
    fields.clear();
    for (const char* f : kReasoningFields) {
      if (last.contains(f) && last[f] == final_value) fields.push_back(f);
    }
  }
  bool mentioned = false;
  for (const auto& f : fields) mentioned |= source_.find(f) != std::string::npos;
  if (!mentioned) {
    throw ChatRequestError("continue_final_message is set to \"" + field + "\" but this is not an accepted field in the chat_template");
  }
  std::string final_text;
  if (final_value.is_array()) {
    bool found = false;
    for (auto it = last[field].rbegin(); it != last[field].rend(); ++it) {
      if (it->is_object() && it->contains("text") && (*it)["text"].is_string()) {
        final_text = (*it)["text"].get<std::string>();
        (*it)["text"] = final_text + kTag;
        found = true;
        break;
      }
    }
    if (!found) {
      throw ChatRequestError("continue_final_message is set but we could not find any text to continue in the final message!");
    }
  } else {
    if (!final_value.is_string()) throw ChatRequestError("the final message's \"" + field + "\" must be a string to continue it");
    final_text = final_value.get<std::string>();
    for (const auto& f : fields) last[f] = last[f].get<std::string>() + kTag;
  }
  std::string rendered = compiled_.render(context, limits);
  const std::string stripped_tag = python_strip(kTag);
  if (rendered.find(python_strip(final_text)) == std::string::npos || rendered.find(stripped_tag) == std::string::npos) {
    throw ChatRequestError(
        "continue_final_message is set but the final message does not appear in the chat after applying the chat "
        "template! This can happen if the chat template deletes portions of the final message.");
  }
  const std::size_t tag_loc = rendered.rfind(stripped_tag);
  if (rendered.compare(tag_loc, kTag.size(), kTag) == 0) return rendered.substr(0, tag_loc);
  return python_rstrip(rendered.substr(0, tag_loc));
}

}  // namespace qwenrt::text
