#pragma once
// Separates streamed model text into reasoning (inside <think>…</think>) and answer content.
// Qwen 3.5's generation prompt already opens <think>, so the stream usually starts inside the
// reasoning; Qwen 3 emits the opening tag itself. Partial tags are held back across chunks.
#include <string>
#include <string_view>

namespace qwenrt::text {

struct TextDelta {
  std::string reasoning, content;
};

class ReasoningSplitter {
 public:
  explicit ReasoningSplitter(bool starts_in_reasoning) : in_reasoning_(starts_in_reasoning) {}

  TextDelta push(std::string_view text);
  TextDelta finish();  // releases anything held back

 private:
  void route(std::string_view text, TextDelta& out);

  bool in_reasoning_;
  bool at_reasoning_start_ = true;  // drop the newline right after <think>
  bool at_content_start_ = true;    // drop the newlines right after </think>
  bool seen_content_ = false;
  std::string held_;
};

}  // namespace qwenrt::text
