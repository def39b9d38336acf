#include "server/openai_api.h"

#include <utility>

namespace qwenrt::server::openai {

namespace {

std::string error_type(int status) {
  switch (status) {
    case 400: return "invalid_request_error";
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 413: return "invalid_request_error";
    case 429: return "rate_limit_error";
    case 503: return "service_unavailable";
    default: return "server_error";
  }
}

// n, and logprobs as chat completions name them (a bool and top_logprobs 0-20) or as completions
// do (an integer 0-20: how many alternatives).
void parse_choices(const json& body, const ServedModel& model, bool chat, ParsedRequest& r) {
  if (auto n = get_int(body, "n", 1, model.limits.max_n)) r.gen.n = static_cast<int>(*n);
  if (chat) {
    r.gen.sampling.logprobs = get_bool(body, "logprobs").value_or(false);
    if (auto top = get_int(body, "top_logprobs", 0, 20)) {
      if (*top > 0 && !r.gen.sampling.logprobs) bad_field("top_logprobs", "needs logprobs: true");
      r.gen.sampling.top_logprobs = static_cast<int32_t>(*top);
    }
  } else if (auto top = get_int(body, "logprobs", 0, 20)) {
    r.gen.sampling.logprobs = true;
    r.gen.sampling.top_logprobs = static_cast<int32_t>(*top);
  }
}

json bytes_of(const std::string& s) {
  json b = json::array();
  for (unsigned char ch : s) b.push_back(static_cast<int>(ch));
  return b;
}

// Chat completions: {"content": [{"token", "logprob", "bytes", "top_logprobs": [...]}], "refusal": null}.
json chat_logprobs(const std::vector<TokenLogprob>& lps) {
  json content = json::array();
  for (const auto& t : lps) {
    json top = json::array();
    for (const auto& a : t.top) top.push_back({{"token", a.bytes}, {"logprob", a.logprob}, {"bytes", bytes_of(a.bytes)}});
    content.push_back({{"token", t.bytes}, {"logprob", t.logprob}, {"bytes", bytes_of(t.bytes)}, {"top_logprobs", top}});
  }
  return {{"content", content}, {"refusal", nullptr}};
}

// Completions: {"tokens", "token_logprobs", "top_logprobs": [{token: logprob}], "text_offset"};
// `offset` is where these tokens' text starts in the choice's text (advanced past them).
json completion_logprobs(const std::vector<TokenLogprob>& lps, int64_t& offset) {
  json tokens = json::array(), token_logprobs = json::array(), top = json::array(), offsets = json::array();
  for (const auto& t : lps) {
    tokens.push_back(t.bytes);
    token_logprobs.push_back(t.logprob);
    json alts = json::object();
    for (const auto& a : t.top) alts[a.bytes] = a.logprob;
    top.push_back(alts);
    offsets.push_back(offset);
    offset += static_cast<int64_t>(t.bytes.size());
  }
  return {{"tokens", tokens}, {"token_logprobs", token_logprobs}, {"top_logprobs", top}, {"text_offset", offsets}};
}

// Text of a message's content: a string, or an array of {"type": "text", "text": ...} parts.
std::string content_text(const json& content, const std::string& path) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) bad_field(path, "must be a string or an array of content parts");
  std::string text;
  for (std::size_t j = 0; j < content.size(); ++j) {
    const std::string pp = path + "[" + std::to_string(j) + "]";
    const json& part = content[j];
    if (!part.is_object()) bad_field(pp, "must be an object");
    const auto type = get_string(part, "type", pp);
    if (!type) bad_field(pp + ".type", "is required");
    if (*type != "text") bad_field(pp + ".type", "'" + *type + "' parts are not supported (only text)");
    const auto t = get_string(part, "text", pp);
    if (!t) bad_field(pp + ".text", "is required");
    text += *t;
  }
  return text;
}

json normalize_messages(const json& messages, const ServedModel& model) {
  if (messages.empty()) bad_field("messages", "must not be empty");
  if (messages.size() > model.limits.max_messages) bad_field("messages", "at most " + std::to_string(model.limits.max_messages) + " messages");
  json out = json::array();
  for (std::size_t i = 0; i < messages.size(); ++i) {
    const std::string path = "messages[" + std::to_string(i) + "]";
    const json& m = messages[i];
    if (!m.is_object()) bad_field(path, "must be an object");
    auto role = get_string(m, "role", path);
    if (!role) bad_field(path + ".role", "is required");
    if (*role == "developer") role = "system";
    if (*role != "system" && *role != "user" && *role != "assistant" && *role != "tool") bad_field(path + ".role", "unknown role '" + *role + "'");
    json msg = {{"role", *role}};
    if (m.contains("content") && !m["content"].is_null()) msg["content"] = content_text(m["content"], path + ".content");
    else if (*role != "assistant") bad_field(path + ".content", "is required");
    else msg["content"] = "";
    if (auto r = get_string(m, "reasoning_content", path)) msg["reasoning_content"] = *r;
    else if (auto r2 = get_string(m, "reasoning", path)) msg["reasoning_content"] = *r2;
    if (auto id = get_string(m, "tool_call_id", path)) msg["tool_call_id"] = *id;
    if (auto n = get_string(m, "name", path)) msg["name"] = *n;
    if (const json* calls = get_array(m, "tool_calls", path)) {
      json tc = json::array();
      for (std::size_t k = 0; k < calls->size(); ++k) {
        const std::string cp = path + ".tool_calls[" + std::to_string(k) + "]";
        const json& c = (*calls)[k];
        if (!c.is_object()) bad_field(cp, "must be an object");
        const json* fn = get_object(c, "function", cp);
        if (!fn) bad_field(cp + ".function", "is required");
        auto name = get_string(*fn, "name", cp + ".function");
        if (!name) bad_field(cp + ".function.name", "is required");
        json args = json::object();
        if (fn->contains("arguments") && !(*fn)["arguments"].is_null()) {
          const json& a = (*fn)["arguments"];
          if (a.is_string()) {
            // The template reads the arguments as a mapping; a string that is not JSON stays text.
            try {
              args = json::parse(a.get<std::string>());
            } catch (const json::exception&) {
              args = a;
            }
          } else if (a.is_object()) {
            args = a;
          } else {
            bad_field(cp + ".function.arguments", "must be a string");
          }
        }
        json call = {{"type", "function"}, {"function", {{"name", *name}, {"arguments", args}}}};
        if (auto id = get_string(c, "id", cp)) call["id"] = *id;
        tc.push_back(call);
      }
      msg["tool_calls"] = tc;
    }
    out.push_back(std::move(msg));
  }
  return out;
}

json normalize_tools(const json& tools, const ServedModel& model) {
  if (tools.size() > model.limits.max_tools) bad_field("tools", "at most " + std::to_string(model.limits.max_tools) + " tools");
  for (std::size_t i = 0; i < tools.size(); ++i) {
    const std::string path = "tools[" + std::to_string(i) + "]";
    if (!tools[i].is_object()) bad_field(path, "must be an object");
    auto type = get_string(tools[i], "type", path);
    if (type && *type != "function") bad_field(path + ".type", "only 'function' tools are supported");
    const json* fn = get_object(tools[i], "function", path);
    if (!fn) bad_field(path + ".function", "is required");
    if (!get_string(*fn, "name", path + ".function")) bad_field(path + ".function.name", "is required");
    get_object(*fn, "parameters", path + ".function");
  }
  return tools;
}

}  // namespace

static void build_chat(const json& body, const ServedModel& model, ParsedRequest& r);

std::vector<int32_t> chat_prompt(const json& body, const ServedModel& model) {
  ParsedRequest r;
  build_chat(body, model, r);
  return r.gen.prompt;
}

json error_body(int status, const std::string& message, const std::string& param) {
  return {{"error", {{"message", message}, {"type", error_type(status)}, {"param", param.empty() ? json(nullptr) : json(param)}, {"code", status}}}};
}

static void build_chat(const json& body, const ServedModel& model, ParsedRequest& r) {
  require_text(model, "messages");
  const json* messages = get_array(body, "messages");
  if (!messages) bad_field("messages", "is required");
  json request = {{"messages", normalize_messages(*messages, model)}, {"add_generation_prompt", true}};
  bool use_tools = false;
  if (const json* tools = get_array(body, "tools"); tools && !tools->empty()) {
    use_tools = true;
    if (body.contains("tool_choice") && !body["tool_choice"].is_null()) {
      const json& tc = body["tool_choice"];
      if (tc.is_string()) {
        const auto s = tc.get<std::string>();
        if (s == "none") use_tools = false;
        else if (s != "auto" && s != "required") bad_field("tool_choice", "must be 'none', 'auto', 'required' or an object");
      } else if (!tc.is_object()) {
        bad_field("tool_choice", "must be a string or an object");
      }
    }
    if (use_tools) {
      request["tools"] = normalize_tools(*tools, model);
      r.gen.output.tool_calls = true;
      r.gen.output.tools = *tools;
    }
  }
  if (const json* kwargs = get_object(body, "chat_template_kwargs")) {
    for (auto it = kwargs->begin(); it != kwargs->end(); ++it)
      if (it.key() != "messages" && it.key() != "tools" && it.key() != "add_generation_prompt") request[it.key()] = it.value();
    get_bool(*kwargs, "enable_thinking", "chat_template_kwargs");
  }
  render_chat(request, model, r.gen);
}

ParsedRequest parse_chat(const json& body, const ServedModel& model) {
  ParsedRequest r;
  build_chat(body, model, r);
  r.gen.sampling = parse_sampling(body, model, 2.0);
  parse_choices(body, model, true, r);
  r.gen.output.stop_strings = get_string_list(body, "stop", model.limits.max_stop_strings);
  r.stream = get_bool(body, "stream").value_or(false);
  if (const json* so = get_object(body, "stream_options")) r.include_usage = get_bool(*so, "include_usage", "stream_options").value_or(false);
  const auto mct = get_int(body, "max_completion_tokens", 1, INT32_MAX);
  const auto mt = get_int(body, "max_tokens", 1, INT32_MAX);
  r.gen.ignore_eos = get_bool(body, "ignore_eos").value_or(false);
  r.gen.max_tokens = resolve_max_tokens(mct ? mct : mt, mct ? "max_completion_tokens" : "max_tokens", r.gen, model, INT32_MAX);
  return r;
}

ParsedRequest parse_completion(const json& body, const ServedModel& model) {
  if (auto e = get_bool(body, "echo"); e && *e) bad_field("echo", "echo is not supported yet");
  if (auto b = get_int(body, "best_of", 1, 128); b && *b != 1) bad_field("best_of", "only best_of = 1 is supported yet");
  ParsedRequest r;
  r.gen.output.split_reasoning = false;
  if (!body.contains("prompt") || body["prompt"].is_null()) bad_field("prompt", "is required");
  json prompt = body["prompt"];
  // A batch of one is the prompt itself.
  if (prompt.is_array() && prompt.size() == 1 && (prompt[0].is_string() || prompt[0].is_array())) prompt = prompt[0];
  if (prompt.is_string()) {
    require_text(model, "prompt");
    r.gen.prompt = model.session.tokenizer().encode(prompt.get<std::string>());
  } else if (prompt.is_array()) {
    const int64_t vocab = model.session.model().config().vocab_size;
    for (std::size_t i = 0; i < prompt.size(); ++i) {
      const json& t = prompt[i];
      if (!t.is_number_integer())
        bad_field("prompt", "must be a string, an array of token ids, or one of those in an array (batches are not supported yet)");
      const int64_t id = t.get<int64_t>();
      if (id < 0 || id >= vocab) bad_field("prompt[" + std::to_string(i) + "]", "token id " + std::to_string(id) + " is outside the vocabulary");
      r.gen.prompt.push_back(static_cast<int32_t>(id));
    }
  } else {
    bad_field("prompt", "must be a string or an array of token ids");
  }
  if (r.gen.prompt.empty()) bad_field("prompt", "must not be empty");
  if (static_cast<int64_t>(r.gen.prompt.size()) >= model.ctx_size)
    bad_field("prompt", "is " + std::to_string(r.gen.prompt.size()) + " tokens, the context " + std::to_string(model.ctx_size) + " (--ctx-size)");
  r.gen.sampling = parse_sampling(body, model, 2.0);
  parse_choices(body, model, false, r);
  r.gen.output.stop_strings = get_string_list(body, "stop", model.limits.max_stop_strings);
  r.gen.ignore_eos = get_bool(body, "ignore_eos").value_or(false);
  r.stream = get_bool(body, "stream").value_or(false);
  if (const json* so = get_object(body, "stream_options")) r.include_usage = get_bool(*so, "include_usage", "stream_options").value_or(false);
  r.gen.max_tokens = resolve_max_tokens(get_int(body, "max_tokens", 1, INT32_MAX), "max_tokens", r.gen, model, 16);
  return r;
}

Response::Response(bool chat, std::string model, bool include_usage)
    : chat_(chat), model_(std::move(model)), id_(random_id(chat ? "chatcmpl-" : "cmpl-")), created_(unix_time()), include_usage_(include_usage) {}

json Response::usage(const GenerationEvent& e, int64_t completion_tokens) const {
  return {{"prompt_tokens", e.prompt_tokens},
          {"completion_tokens", completion_tokens},
          {"total_tokens", e.prompt_tokens + completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", e.cached_tokens}}}};
}

json Response::whole(const Collected& all) const {
  json choices = json::array();
  for (std::size_t i = 0; i < all.choices.size(); ++i) {
    const CollectedChoice& c = all.choices[i];
    const bool want_logprobs = c.finish.finished && !c.logprobs.empty();
    json choice;
    if (chat_) {
      json message = {{"role", "assistant"}};
      std::string content = c.content;
      if (!c.tool_calls.empty()) {
        // Whitespace around the calls is not content.
        const auto b = content.find_first_not_of(" \t\r\n"), e = content.find_last_not_of(" \t\r\n");
        content = b == std::string::npos ? "" : content.substr(b, e - b + 1);
      }
      message["content"] = content.empty() && !c.tool_calls.empty() ? json(nullptr) : json(content);
      if (!c.reasoning.empty()) message["reasoning_content"] = c.reasoning;
      if (!c.tool_calls.empty()) {
        json calls = json::array();
        for (const auto& t : c.tool_calls)
          calls.push_back({{"id", random_id("call_")}, {"type", "function"}, {"function", {{"name", t.name}, {"arguments", arguments_string(t)}}}});
        message["tool_calls"] = calls;
      }
      choice = {{"index", i},
                {"message", message},
                {"logprobs", want_logprobs ? chat_logprobs(c.logprobs) : json(nullptr)},
                {"finish_reason", finish_reason_name(c.finish.finish)}};
    } else {
      int64_t offset = 0;
      choice = {{"index", i},
                {"text", c.content},
                {"logprobs", want_logprobs ? completion_logprobs(c.logprobs, offset) : json(nullptr)},
                {"finish_reason", finish_reason_name(c.finish.finish)}};
    }
    choices.push_back(std::move(choice));
  }
  return {{"id", id_},          {"object", chat_ ? "chat.completion" : "text_completion"}, {"created", created_}, {"model", model_},
          {"choices", choices}, {"usage", usage(all.finish, all.finish.completion_tokens)}};
}

json Response::chunk(json choice) const {
  json j = {{"id", id_}, {"object", chat_ ? "chat.completion.chunk" : "text_completion"}, {"created", created_}, {"model", model_}};
  j["choices"] = choice.is_null() ? json::array() : json::array({choice});
  return j;
}

std::string Response::role_chunk(int choice) {
  if (!chat_) return "";
  return sse(chunk({{"index", choice}, {"delta", {{"role", "assistant"}, {"content", ""}}}, {"logprobs", nullptr}, {"finish_reason", nullptr}}));
}

std::string Response::stream_start() {
  started_.assign(1, true);
  return role_chunk(0);
}

std::string Response::stream_event(const GenerationEvent& e) {
  std::string out;
  const int i = e.choice;
  if (started_.size() <= static_cast<std::size_t>(i)) started_.resize(static_cast<std::size_t>(i) + 1, false);
  if (!started_[static_cast<std::size_t>(i)]) {
    started_[static_cast<std::size_t>(i)] = true;
    out += role_chunk(i);
  }
  if (offsets_.size() <= static_cast<std::size_t>(i)) offsets_.resize(static_cast<std::size_t>(i) + 1, 0);
  // Each token's logprobs go with the first chunk after it was sampled.
  json logprobs = nullptr;
  if (!e.logprobs.empty()) logprobs = chat_ ? chat_logprobs(e.logprobs) : completion_logprobs(e.logprobs, offsets_[static_cast<std::size_t>(i)]);
  auto take_logprobs = [&] { return std::exchange(logprobs, nullptr); };
  const OutputDelta& d = e.delta;
  if (chat_) {
    if (!d.reasoning.empty())
      out += sse(chunk({{"index", i}, {"delta", {{"reasoning_content", d.reasoning}}}, {"logprobs", take_logprobs()}, {"finish_reason", nullptr}}));
    if (!d.content.empty())
      out += sse(chunk({{"index", i}, {"delta", {{"content", d.content}}}, {"logprobs", take_logprobs()}, {"finish_reason", nullptr}}));
    for (const auto& t : d.tool_calls) {
      json call = {{"index", tool_calls_[i]++},
                   {"id", random_id("call_")},
                   {"type", "function"},
                   {"function", {{"name", t.name}, {"arguments", arguments_string(t)}}}};
      out += sse(chunk({{"index", i}, {"delta", {{"tool_calls", json::array({call})}}}, {"logprobs", take_logprobs()}, {"finish_reason", nullptr}}));
    }
  } else if (!d.content.empty()) {
    out += sse(chunk({{"index", i}, {"text", d.content}, {"logprobs", take_logprobs()}, {"finish_reason", nullptr}}));
  }
  if (e.finished) {
    completion_tokens_ += e.completion_tokens;
    if (e.finish == FinishReason::Error) {
      out += sse(error_body(500, "generation failed: " + e.error));
    } else if (chat_) {
      out += sse(chunk({{"index", i}, {"delta", json::object()}, {"logprobs", take_logprobs()}, {"finish_reason", finish_reason_name(e.finish)}}));
    } else {
      out += sse(chunk({{"index", i}, {"text", ""}, {"logprobs", take_logprobs()}, {"finish_reason", finish_reason_name(e.finish)}}));
    }
  }
  if (e.last) {
    if (include_usage_ && e.finish != FinishReason::Error) {
      json u = chunk(nullptr);
      u["usage"] = usage(e, completion_tokens_);
      out += sse(u);
    }
    out += "data: [DONE]\n\n";
  }
  return out;
}

}  // namespace qwenrt::server::openai
