// Parses Qwen 3.5's XML tool calls out of generated text into JSON arguments.
#include "text/output/tool_call_parser.h"

#include <optional>

namespace qwenrt::text {

namespace {

using nlohmann::ordered_json;

std::string strip_one_newline(std::string s) {
  if (!s.empty() && s.front() == '\n') s.erase(0, 1);
  if (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
}

// The JSON-schema type of parameter `param` of function `name`, if the tools declare it.
std::optional<std::string> schema_type(const ordered_json& tools, const std::string& name, const std::string& param) {
  if (!tools.is_array()) return std::nullopt;
  for (const auto& t : tools) {
    const ordered_json& f = t.contains("function") ? t["function"] : t;
    if (!f.is_object() || f.value("name", "") != name) continue;
    const auto props = f.find("parameters");
    if (props == f.end() || !props->is_object() || !props->contains("properties")) return std::nullopt;
    const auto& p = (*props)["properties"];
    if (!p.is_object() || !p.contains(param) || !p[param].is_object()) return std::nullopt;
    const auto& type = p[param]["type"];
    if (type.is_string()) return type.get<std::string>();
    return std::nullopt;
  }
  return std::nullopt;
}

ordered_json convert(const std::string& raw, const std::optional<std::string>& type) {
  if (!type || *type == "string") return raw;
  const std::string v = trim(raw);
  if (*type == "boolean") {
    if (v == "true" || v == "True") return true;
    if (v == "false" || v == "False") return false;
    return raw;
  }
  if (*type == "null" && (v == "null" || v == "None")) return nullptr;
  // integer, number, object, array: JSON when it parses as one, else the text as given.
  ordered_json j = ordered_json::parse(v, nullptr, false);
  if (j.is_discarded()) return raw;
  if ((*type == "integer" && !j.is_number_integer()) || (*type == "number" && !j.is_number()) || (*type == "object" && !j.is_object()) ||
      (*type == "array" && !j.is_array()))
    return raw;
  return j;
}

// Parses the inside of one <tool_call>…</tool_call>; nullopt when it is not a well-formed call.
std::optional<ToolCall> parse_call(const std::string& body, const ordered_json& tools) {
  const std::string fopen = "<function=", fclose = "</function>", popen = "<parameter=", pclose = "</parameter>";
  std::size_t at = body.find(fopen);
  if (at == std::string::npos) return std::nullopt;
  const std::size_t name_end = body.find('>', at);
  const std::size_t end = body.rfind(fclose);
  if (name_end == std::string::npos || end == std::string::npos || end < name_end) return std::nullopt;
  ToolCall call;
  call.name = trim(body.substr(at + fopen.size(), name_end - at - fopen.size()));
  if (call.name.empty()) return std::nullopt;
  call.arguments = ordered_json::object();
  std::size_t pos = name_end + 1;
  for (;;) {
    const std::size_t p = body.find(popen, pos);
    if (p == std::string::npos || p > end) break;
    const std::size_t key_end = body.find('>', p);
    const std::size_t close = body.find(pclose, key_end == std::string::npos ? p : key_end);
    if (key_end == std::string::npos || close == std::string::npos || close > end) return std::nullopt;
    const std::string key = trim(body.substr(p + popen.size(), key_end - p - popen.size()));
    const std::string value = strip_one_newline(body.substr(key_end + 1, close - key_end - 1));
    call.arguments[key] = convert(value, schema_type(tools, call.name, key));
    pos = close + pclose.size();
  }
  return call;
}

}  // namespace

ParsedContent parse_tool_calls(const std::string& text, const ordered_json& tools) {
  const std::string open = "<tool_call>", close = "</tool_call>";
  ParsedContent out;
  std::string content;
  std::size_t pos = 0;
  for (;;) {
    const std::size_t a = text.find(open, pos);
    if (a == std::string::npos) {
      content += text.substr(pos);
      break;
    }
    const std::size_t b = text.find(close, a + open.size());
    const std::size_t body_end = b == std::string::npos ? text.size() : b;  // an unclosed final call still counts
    auto call = parse_call(text.substr(a + open.size(), body_end - a - open.size()), tools);
    if (!call) {
      content += text.substr(pos, (b == std::string::npos ? text.size() : b + close.size()) - pos);
    } else {
      content += text.substr(pos, a - pos);
      out.calls.push_back(std::move(*call));
    }
    if (b == std::string::npos) break;
    pos = b + close.size();
  }
  out.content = trim(content);
  return out;
}

}  // namespace qwenrt::text
