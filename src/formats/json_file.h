#pragma once
#include <cstddef>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace qwenrt {

// The deepest nesting of arrays and objects accepted in a JSON file or request. Parsing is iterative,
// but copying, printing and walking a parsed value recurse: every untrusted JSON text is checked
// against this before it is parsed. Real files (config, tokenizer, chat requests) stay below 20.
inline constexpr std::size_t kMaxJsonDepth = 512;

// Throws qwenrt::Error "<what>: JSON nested more than <max_depth> levels deep ..." when `text` nests
// '[' / '{' deeper than max_depth (a byte scan that skips string literals; malformed text is left to
// the parser).
void check_json_depth(std::string_view text, const std::string& what, std::size_t max_depth = kMaxJsonDepth);

// Reads and parses a JSON file; errors name the file and the parse position (or the nesting limit).
nlohmann::json read_json_file(const std::filesystem::path& path);

}  // namespace qwenrt
