#pragma once
// API keys: `Authorization: Bearer KEY` (OpenAI) or `x-api-key: KEY` (Anthropic), compared in
// constant time.
#include <string>
#include <string_view>

namespace qwenrt::server {

// Equal strings, in a time that depends only on the lengths.
bool constant_time_equal(std::string_view a, std::string_view b);

// Whether the headers carry `key` (an empty key lets everything through).
bool authorized(const std::string& key, const std::string& authorization_header, const std::string& x_api_key_header);

}  // namespace qwenrt::server
