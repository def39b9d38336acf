#pragma once
// What one generated sequence's tokens become as text, token by token: bytes detokenized
// incrementally with stop strings (text/output TextStream), reasoning split from the answer
// (ReasoningSplitter), and, when asked, Qwen 3.5 XML tool calls cut out of the answer as each one
// closes (parse_tool_calls). What `run` (TextSession) and the server's scheduler share.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "text/output/reasoning_splitter.h"
#include "text/output/text_stream.h"
#include "text/output/tool_call_parser.h"
#include "text/tokenizer/tokenizer.h"

namespace qwenrt {

struct TextOutputOptions {
  std::vector<std::string> stop_strings;  // the text ends before the first one generated
  bool split_reasoning = true;            // else everything is content
  bool starts_in_reasoning = false;       // the prompt left a <think> block open
  bool tool_calls = false;                // cut <tool_call> blocks out of the content
  nlohmann::ordered_json tools;           // the request's OpenAI-style tools (argument types), or null
};

struct OutputDelta {
  std::string reasoning, content;
  std::vector<text::ToolCall> tool_calls;
  bool empty() const { return reasoning.empty() && content.empty() && tool_calls.empty(); }
  void append(OutputDelta&& other);
};

class TextOutput {
 public:
  TextOutput(const text::Tokenizer& tokenizer, TextOutputOptions options);

  OutputDelta push(int32_t token);  // special tokens give no text
  OutputDelta finish();             // everything held back

  bool stopped() const { return stream_.stopped(); }  // a stop string was generated
  const std::string& stop_hit() const { return stream_.stop_hit(); }
  int tool_call_count() const { return tool_call_count_; }

 private:
  void route(text::TextDelta&& d, OutputDelta& out);
  void cut_tool_calls(const std::string& content, OutputDelta& out);

  const text::Tokenizer& tokenizer_;
  TextOutputOptions options_;
  text::TextStream stream_;
  text::ReasoningSplitter splitter_;
  std::string held_;  // content at or after a "<tool_call>" (or a prefix of one) not yet resolved
  bool in_call_ = false;
  int tool_call_count_ = 0;
};

// Whether a rendered prompt leaves a <think> block open (Qwen 3.5 with thinking on).
bool prompt_opens_reasoning(const std::string& prompt_text);

}  // namespace qwenrt
