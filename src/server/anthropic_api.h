#pragma once
// The Anthropic Messages API: /v1/messages requests to GenerationRequests (system, content blocks
// text / tool_use / tool_result / thinking, tools, stop_sequences), and the answer, whole or as its
// event sequence (message_start, content_block_start / _delta / _stop, message_delta,
// message_stop), and the error shape {"type": "error", "error": {"type", "message"}}.
#include <string>

#include "server/api_common.h"

namespace qwenrt::server::anthropic {

ParsedRequest parse_messages(const json& body, const ServedModel& model);

json error_body(int status, const std::string& message);

class Response {
 public:
  explicit Response(std::string model);
  json whole(const Collected& c) const;
  // message_start waits for the first event, which tells how much of the prompt the cache held.
  std::string stream_start(int64_t prompt_tokens);
  std::string stream_event(const GenerationEvent& e);
  // Anthropic's usage: input_tokens are those not read from the cache.
  static json usage(const GenerationEvent& e, int64_t output_tokens);

 private:
  static std::string event(const char* name, const json& j) {
    return std::string("event: ") + name + "\ndata: " + j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n";
  }
  std::string message_start(const GenerationEvent& e);
  std::string open_block(const char* type);
  std::string close_block();

  std::string model_, id_;
  bool started_ = false;    // message_start sent
  int index_ = -1;          // the content block open now
  std::string block_type_;  // its type ("" when none is open)
};

}  // namespace qwenrt::server::anthropic
