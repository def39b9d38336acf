#pragma once
// Qwen 3.5's XML tool calls in generated content:
//   <tool_call>\n<function=NAME>\n<parameter=KEY>\nVALUE\n</parameter>\n…</function>\n</tool_call>
// Parameter values are raw text; they become JSON using the tool's parameter schema (integer,
// number, boolean, object, array, null → parsed; string or unknown → kept as text).
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace qwenrt::text {

struct ToolCall {
  std::string name;
  nlohmann::ordered_json arguments;  // an object
};

struct ParsedContent {
  std::string content;          // the text outside tool calls, trimmed
  std::vector<ToolCall> calls;  // in order
};

// `tools`: the request's OpenAI-style tools array (may be null). Malformed calls are left in the
// content as text rather than dropped.
ParsedContent parse_tool_calls(const std::string& text, const nlohmann::ordered_json& tools = nullptr);

}  // namespace qwenrt::text
