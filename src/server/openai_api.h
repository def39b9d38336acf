#pragma once
// The OpenAI API: /v1/chat/completions and /v1/completions requests to GenerationRequests, and
// their answers, whole or as server-sent events, and the error shape
// {"error": {"message", "type", "param", "code"}}.
#include <map>
#include <string>
#include <vector>

#include "server/api_common.h"

namespace qwenrt::server::openai {

ParsedRequest parse_chat(const json& body, const ServedModel& model);
ParsedRequest parse_completion(const json& body, const ServedModel& model);
// The tokens of a chat request's rendered prompt (what /tokenize answers for messages).
std::vector<int32_t> chat_prompt(const json& body, const ServedModel& model);

json error_body(int status, const std::string& message, const std::string& param = "");

// One request's answer. `chat` picks chat.completion(.chunk) over text_completion.
class Response {
 public:
  Response(bool chat, std::string model, bool include_usage);
  json whole(const Collected& c) const;
  // The SSE text for the start of a stream, for each event, and after the finish.
  std::string stream_start();
  std::string stream_event(const GenerationEvent& e);

 private:
  json chunk(json choice) const;
  std::string role_chunk(int choice);
  static std::string sse(const json& j) { return "data: " + j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n"; }
  json usage(const GenerationEvent& e, int64_t completion_tokens) const;

  bool chat_;
  std::string model_, id_;
  int64_t created_;
  bool include_usage_;
  std::map<int, int> tool_calls_;  // per choice: streamed so far (their indices)
  std::vector<bool> started_;      // per choice: its role chunk went out
  std::vector<int64_t> offsets_;   // per choice: text_offset of its next token (completions)
  int64_t completion_tokens_ = 0;  // of the choices finished so far
};

}  // namespace qwenrt::server::openai
