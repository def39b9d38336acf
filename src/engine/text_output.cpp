#include "engine/text_output.h"

namespace qwenrt {

namespace {
constexpr std::string_view kOpen = "<tool_call>", kClose = "</tool_call>";
}

void OutputDelta::append(OutputDelta&& other) {
  reasoning += other.reasoning;
  content += other.content;
  for (auto& c : other.tool_calls) tool_calls.push_back(std::move(c));
}

TextOutput::TextOutput(const text::Tokenizer& tokenizer, TextOutputOptions options)
    : tokenizer_(tokenizer), options_(std::move(options)), stream_(options_.stop_strings), splitter_(options_.starts_in_reasoning) {}

OutputDelta TextOutput::push(int32_t token) {
  OutputDelta out;
  if (tokenizer_.is_special(token)) return out;
  const std::string text = stream_.push(tokenizer_.token_bytes(token));
  if (text.empty()) return out;
  if (options_.split_reasoning) route(splitter_.push(text), out);
  else route({{}, text}, out);
  return out;
}

OutputDelta TextOutput::finish() {
  OutputDelta out;
  const std::string text = stream_.finish();
  if (options_.split_reasoning) {
    route(splitter_.push(text), out);
    route(splitter_.finish(), out);
  } else {
    route({{}, text}, out);
  }
  if (!held_.empty()) {
    // An unclosed call: parsed if it parses, else text.
    auto parsed = in_call_ ? text::parse_tool_calls(held_, options_.tools) : text::ParsedContent{};
    if (parsed.calls.empty()) {
      out.content += held_;
    } else {
      out.content += parsed.content;
      tool_call_count_ += static_cast<int>(parsed.calls.size());
      for (auto& c : parsed.calls) out.tool_calls.push_back(std::move(c));
    }
    held_.clear();
    in_call_ = false;
  }
  return out;
}

void TextOutput::route(text::TextDelta&& d, OutputDelta& out) {
  out.reasoning += d.reasoning;
  if (d.content.empty()) return;
  if (options_.tool_calls) cut_tool_calls(d.content, out);
  else out.content += d.content;
}

void TextOutput::cut_tool_calls(const std::string& content, OutputDelta& out) {
  held_ += content;
  while (true) {
    if (!in_call_) {
      const auto p = held_.find(kOpen);
      if (p == std::string::npos) {
        const std::size_t keep = text::partial_suffix_match(held_, {std::string(kOpen)});
        out.content += held_.substr(0, held_.size() - keep);
        held_.erase(0, held_.size() - keep);
        return;
      }
      out.content += held_.substr(0, p);
      held_.erase(0, p);
      in_call_ = true;
    }
    const auto q = held_.find(kClose);
    if (q == std::string::npos) return;
    const std::string block = held_.substr(0, q + kClose.size());
    held_.erase(0, q + kClose.size());
    in_call_ = false;
    auto parsed = text::parse_tool_calls(block, options_.tools);
    if (parsed.calls.empty()) {
      out.content += block;  // malformed: left as text, as parse_tool_calls does
    } else {
      out.content += parsed.content;
      tool_call_count_ += static_cast<int>(parsed.calls.size());
      for (auto& c : parsed.calls) out.tool_calls.push_back(std::move(c));
    }
  }
}

bool prompt_opens_reasoning(const std::string& prompt_text) {
  const auto open = prompt_text.rfind("<think>"), close = prompt_text.rfind("</think>");
  return open != std::string::npos && (close == std::string::npos || close < open);
}

}  // namespace qwenrt
