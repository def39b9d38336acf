#pragma once
// Reading request JSON: the body parsed with a nesting limit, and typed fields read with errors
// (400 RequestError) that name the field. Absent and null fields are "not given"; unknown fields
// are ignored.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/request_error.h"

namespace qwenrt::server {

using json = nlohmann::ordered_json;

inline constexpr int kMaxJsonDepth = 64;

// The body as a JSON object; 400 when it is not JSON, nests deeper than kMaxJsonDepth or is not an
// object.
json parse_body(std::string_view body);

// Typed optional fields of `obj` (an object); `path` prefixes the field name in errors.
std::optional<bool> get_bool(const json& obj, const std::string& key, const std::string& path = "");
std::optional<int64_t> get_int(const json& obj, const std::string& key, int64_t lo, int64_t hi, const std::string& path = "");
std::optional<double> get_number(const json& obj, const std::string& key, double lo, double hi, const std::string& path = "");
std::optional<std::string> get_string(const json& obj, const std::string& key, const std::string& path = "");
// Present, non-null, of the given kind ("array" / "object"), else nullptr.
const json* get_array(const json& obj, const std::string& key, const std::string& path = "");
const json* get_object(const json& obj, const std::string& key, const std::string& path = "");
// A string or a list of strings (OpenAI's `stop`), at most `max_items`, each non-empty.
std::vector<std::string> get_string_list(const json& obj, const std::string& key, std::size_t max_items, const std::string& path = "");

[[noreturn]] void bad_field(const std::string& field, const std::string& message);

}  // namespace qwenrt::server
