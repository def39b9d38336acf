// Splits streamed model text into reasoning (<think>...</think>) and answer, holding partial tags back.
#include "text/output/reasoning_splitter.h"

#include "text/output/text_stream.h"

namespace qwenrt::text {

namespace {
const std::string kOpen = "<think>", kClose = "</think>";
}

void ReasoningSplitter::route(std::string_view text, TextDelta& out) {
  if (text.empty()) return;
  if (in_reasoning_) {
    if (at_reasoning_start_ && text.front() == '\n') text.remove_prefix(1);
    if (!text.empty()) at_reasoning_start_ = false;
    out.reasoning.append(text);
  } else {
    if (at_content_start_ && seen_content_ == false) {
      while (!text.empty() && text.front() == '\n') text.remove_prefix(1);
    }
    if (!text.empty()) at_content_start_ = false, seen_content_ = true;
    out.content.append(text);
  }
}

TextDelta ReasoningSplitter::push(std::string_view chunk) {
  TextDelta out;
  held_.append(chunk);
  for (;;) {
    const std::string& tag = in_reasoning_ ? kClose : kOpen;
    const std::size_t at = held_.find(tag);
    // An opening tag only counts before any answer text (Qwen 3 puts it first).
    const bool opens_first = !seen_content_ && at != std::string::npos && held_.find_first_not_of(" \t\r\n") == at;  // only whitespace before it
    if (at != std::string::npos && (in_reasoning_ || opens_first)) {
      route(std::string_view(held_).substr(0, at), out);
      held_.erase(0, at + tag.size());
      if (in_reasoning_) {
        // Drop the newline before </think> as the template writes "\n</think>".
        if (!out.reasoning.empty() && out.reasoning.back() == '\n') out.reasoning.pop_back();
        at_content_start_ = true;
      } else {
        at_reasoning_start_ = true;
      }
      in_reasoning_ = !in_reasoning_;
      continue;
    }
    // Hold a possible partial tag (and, in reasoning, one trailing newline that may precede it).
    std::size_t hold = (in_reasoning_ || !seen_content_) ? partial_suffix_match(held_, {tag}) : 0;
    if (in_reasoning_ && hold == 0 && !held_.empty() && held_.back() == '\n') hold = 1;
    if (in_reasoning_ && hold > 0 && held_.size() > hold && held_[held_.size() - hold - 1] == '\n') ++hold;
    route(std::string_view(held_).substr(0, held_.size() - hold), out);
    held_.erase(0, held_.size() - hold);
    return out;
  }
}

TextDelta ReasoningSplitter::finish() {
  TextDelta out;
  if (in_reasoning_ && !held_.empty() && held_.back() == '\n') held_.pop_back();
  route(held_, out);
  held_.clear();
  return out;
}

}  // namespace qwenrt::text
