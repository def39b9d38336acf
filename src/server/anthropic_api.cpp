#include "server/anthropic_api.h"

namespace qwenrt::server::anthropic {

namespace {

std::string error_type(int status) {
  switch (status) {
    case 400: return "invalid_request_error";
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 413: return "request_too_large";
    case 429: return "rate_limit_error";
    case 503: return "overloaded_error";
    default: return "api_error";
  }
}

std::string stop_reason(const GenerationEvent& e) {
  switch (e.finish) {
    case FinishReason::Length: return "max_tokens";
    case FinishReason::StopString: return "stop_sequence";
    case FinishReason::ToolCalls: return "tool_use";
    default: return "end_turn";
  }
}

std::string text_of_blocks(const json& content, const std::string& path) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) bad_field(path, "must be a string or an array of content blocks");
  std::string text;
  for (std::size_t j = 0; j < content.size(); ++j) {
    const std::string bp = path + "[" + std::to_string(j) + "]";
    if (!content[j].is_object()) bad_field(bp, "must be an object");
    const auto type = get_string(content[j], "type", bp);
    if (type != "text") bad_field(bp + ".type", "only text blocks are supported here");
    const auto t = get_string(content[j], "text", bp);
    if (!t) bad_field(bp + ".text", "is required");
    text += *t;
  }
  return text;
}

// Anthropic messages to the chat template's (OpenAI-style) messages.
void convert_message(const json& m, const std::string& path, json& out) {
  if (!m.is_object()) bad_field(path, "must be an object");
  const auto role = get_string(m, "role", path);
  if (!role) bad_field(path + ".role", "is required");
  if (*role != "user" && *role != "assistant") bad_field(path + ".role", "must be 'user' or 'assistant'");
  if (!m.contains("content") || m["content"].is_null()) bad_field(path + ".content", "is required");
  const json& content = m["content"];
  if (content.is_string()) {
    out.push_back({{"role", *role}, {"content", content}});
    return;
  }
  if (!content.is_array()) bad_field(path + ".content", "must be a string or an array of content blocks");
  std::string text, thinking;
  json calls = json::array();
  for (std::size_t j = 0; j < content.size(); ++j) {
    const std::string bp = path + ".content[" + std::to_string(j) + "]";
    const json& b = content[j];
    if (!b.is_object()) bad_field(bp, "must be an object");
    const auto type = get_string(b, "type", bp);
    if (!type) bad_field(bp + ".type", "is required");
    if (*type == "text") {
      const auto t = get_string(b, "text", bp);
      if (!t) bad_field(bp + ".text", "is required");
      text += *t;
    } else if (*type == "thinking") {
      thinking += get_string(b, "thinking", bp).value_or("");
    } else if (*type == "redacted_thinking") {
    } else if (*type == "tool_use") {
      if (*role != "assistant") bad_field(bp + ".type", "tool_use blocks belong to assistant messages");
      const auto name = get_string(b, "name", bp);
      if (!name) bad_field(bp + ".name", "is required");
      json input = json::object();
      if (const json* in = get_object(b, "input", bp)) input = *in;
      json call = {{"type", "function"}, {"function", {{"name", *name}, {"arguments", input}}}};
      if (auto id = get_string(b, "id", bp)) call["id"] = *id;
      calls.push_back(call);
    } else if (*type == "tool_result") {
      if (*role != "user") bad_field(bp + ".type", "tool_result blocks belong to user messages");
      json tool = {{"role", "tool"},
                   {"content", b.contains("content") && !b["content"].is_null() ? text_of_blocks(b["content"], bp + ".content") : ""}};
      if (auto id = get_string(b, "tool_use_id", bp)) tool["tool_call_id"] = *id;
      out.push_back(tool);
    } else {
      bad_field(bp + ".type", "'" + *type + "' blocks are not supported");
    }
  }
  if (*role == "assistant") {
    json msg = {{"role", "assistant"}, {"content", text}};
    if (!thinking.empty()) msg["reasoning_content"] = thinking;
    if (!calls.empty()) msg["tool_calls"] = calls;
    out.push_back(msg);
  } else if (!text.empty()) {
    out.push_back({{"role", "user"}, {"content", text}});
  }
}

}  // namespace

json error_body(int status, const std::string& message) {
  return {{"type", "error"}, {"error", {{"type", error_type(status)}, {"message", message}}}};
}

ParsedRequest parse_messages(const json& body, const ServedModel& model) {
  require_text(model, "messages");
  ParsedRequest r;
  const json* messages = get_array(body, "messages");
  if (!messages) bad_field("messages", "is required");
  if (messages->empty()) bad_field("messages", "must not be empty");
  if (messages->size() > model.limits.max_messages) bad_field("messages", "at most " + std::to_string(model.limits.max_messages) + " messages");
  const auto max_tokens = get_int(body, "max_tokens", 1, INT32_MAX);
  if (!max_tokens) bad_field("max_tokens", "is required");
  json chat = json::array();
  if (body.contains("system") && !body["system"].is_null())
    chat.push_back({{"role", "system"}, {"content", text_of_blocks(body["system"], "system")}});
  for (std::size_t i = 0; i < messages->size(); ++i) convert_message((*messages)[i], "messages[" + std::to_string(i) + "]", chat);
  json request = {{"messages", chat}, {"add_generation_prompt", true}};
  if (const json* tools = get_array(body, "tools"); tools && !tools->empty()) {
    if (tools->size() > model.limits.max_tools) bad_field("tools", "at most " + std::to_string(model.limits.max_tools) + " tools");
    bool use = true;
    if (const json* tc = get_object(body, "tool_choice")) use = get_string(*tc, "type", "tool_choice").value_or("auto") != "none";
    json converted = json::array();
    for (std::size_t i = 0; i < tools->size(); ++i) {
      const std::string tp = "tools[" + std::to_string(i) + "]";
      const json& t = (*tools)[i];
      if (!t.is_object()) bad_field(tp, "must be an object");
      const auto name = get_string(t, "name", tp);
      if (!name) bad_field(tp + ".name", "is required");
      json fn = {{"name", *name}};
      if (auto d = get_string(t, "description", tp)) fn["description"] = *d;
      const json* schema = get_object(t, "input_schema", tp);
      fn["parameters"] = schema ? *schema : json{{"type", "object"}, {"properties", json::object()}};
      converted.push_back({{"type", "function"}, {"function", fn}});
    }
    if (use) {
      request["tools"] = converted;
      r.gen.output.tool_calls = true;
      r.gen.output.tools = converted;
    }
  }
  if (const json* thinking = get_object(body, "thinking")) {
    const auto type = get_string(*thinking, "type", "thinking");
    if (type && *type != "enabled" && *type != "disabled") bad_field("thinking.type", "must be 'enabled' or 'disabled'");
    request["enable_thinking"] = type.value_or("enabled") == "enabled";
  }
  r.gen.sampling = parse_sampling(body, model, 1.0);
  r.gen.output.stop_strings = get_string_list(body, "stop_sequences", model.limits.max_stop_strings);
  r.stream = get_bool(body, "stream").value_or(false);
  render_chat(request, model, r.gen);
  r.gen.max_tokens = resolve_max_tokens(max_tokens, "max_tokens", r.gen, model, INT32_MAX);
  return r;
}

Response::Response(std::string model) : model_(std::move(model)), id_(random_id("msg_")) {}

json Response::usage(const GenerationEvent& e, int64_t output_tokens) {
  return {{"input_tokens", e.prompt_tokens - e.cached_tokens},
          {"cache_creation_input_tokens", 0},
          {"cache_read_input_tokens", e.cached_tokens},
          {"output_tokens", output_tokens}};
}

json Response::whole(const Collected& all) const {
  const CollectedChoice& c = all.first();
  json content = json::array();
  if (!c.reasoning.empty()) content.push_back({{"type", "thinking"}, {"thinking", c.reasoning}, {"signature", ""}});
  std::string text = c.content;
  if (!c.tool_calls.empty()) {
    const auto b = text.find_first_not_of(" \t\r\n"), e = text.find_last_not_of(" \t\r\n");
    text = b == std::string::npos ? "" : text.substr(b, e - b + 1);
  }
  if (!text.empty() || content.empty()) content.push_back({{"type", "text"}, {"text", text}});
  for (const auto& t : c.tool_calls) content.push_back({{"type", "tool_use"}, {"id", random_id("toolu_")}, {"name", t.name}, {"input", t.arguments}});
  return {{"id", id_},
          {"type", "message"},
          {"role", "assistant"},
          {"model", model_},
          {"content", content},
          {"stop_reason", stop_reason(c.finish)},
          {"stop_sequence", c.finish.finish == FinishReason::StopString ? json(c.finish.stop_string) : json(nullptr)},
          {"usage", usage(c.finish, c.finish.completion_tokens)}};
}

std::string Response::stream_start(int64_t) { return ""; }

std::string Response::message_start(const GenerationEvent& e) {
  started_ = true;
  json message = {{"id", id_},
                  {"type", "message"},
                  {"role", "assistant"},
                  {"model", model_},
                  {"content", json::array()},
                  {"stop_reason", nullptr},
                  {"stop_sequence", nullptr},
                  {"usage", usage(e, 0)}};
  return event("message_start", {{"type", "message_start"}, {"message", message}});
}

std::string Response::open_block(const char* type) {
  std::string out;
  if (block_type_ == type) return out;
  out += close_block();
  ++index_;
  block_type_ = type;
  json block;
  if (block_type_ == "thinking") block = {{"type", "thinking"}, {"thinking", ""}, {"signature", ""}};
  else block = {{"type", "text"}, {"text", ""}};
  return out + event("content_block_start", {{"type", "content_block_start"}, {"index", index_}, {"content_block", block}});
}

std::string Response::close_block() {
  if (block_type_.empty()) return "";
  block_type_.clear();
  return event("content_block_stop", {{"type", "content_block_stop"}, {"index", index_}});
}

std::string Response::stream_event(const GenerationEvent& e) {
  std::string out = started_ ? "" : message_start(e);
  const OutputDelta& d = e.delta;
  if (!d.reasoning.empty()) {
    out += open_block("thinking");
    out += event("content_block_delta",
                 {{"type", "content_block_delta"}, {"index", index_}, {"delta", {{"type", "thinking_delta"}, {"thinking", d.reasoning}}}});
  }
  // Whitespace between the reasoning and a tool call opens no text block.
  const bool blank = d.content.find_first_not_of(" \t\r\n") == std::string::npos;
  if (!d.content.empty() && !(blank && block_type_ != "text")) {
    out += open_block("text");
    out +=
        event("content_block_delta", {{"type", "content_block_delta"}, {"index", index_}, {"delta", {{"type", "text_delta"}, {"text", d.content}}}});
  }
  for (const auto& t : d.tool_calls) {
    out += close_block();
    ++index_;
    out += event("content_block_start",
                 {{"type", "content_block_start"},
                  {"index", index_},
                  {"content_block", {{"type", "tool_use"}, {"id", random_id("toolu_")}, {"name", t.name}, {"input", json::object()}}}});
    out +=
        event("content_block_delta",
              {{"type", "content_block_delta"}, {"index", index_}, {"delta", {{"type", "input_json_delta"}, {"partial_json", arguments_string(t)}}}});
    out += event("content_block_stop", {{"type", "content_block_stop"}, {"index", index_}});
  }
  if (e.finished) {
    if (e.finish == FinishReason::Error) return out + event("error", error_body(500, "generation failed: " + e.error));
    if (index_ < 0) out += open_block("text");  // an answer has at least one block
    out += close_block();
    out += event(
        "message_delta",
        {{"type", "message_delta"},
         {"delta", {{"stop_reason", stop_reason(e)}, {"stop_sequence", e.finish == FinishReason::StopString ? json(e.stop_string) : json(nullptr)}}},
         {"usage", usage(e, e.completion_tokens)}});
    out += event("message_stop", {{"type", "message_stop"}});
  }
  return out;
}

}  // namespace qwenrt::server::anthropic
