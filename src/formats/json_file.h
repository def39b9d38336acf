#pragma once
#include <filesystem>
#include <nlohmann/json.hpp>

namespace qwenrt {

// Reads and parses a JSON file; errors name the file and the parse position.
nlohmann::json read_json_file(const std::filesystem::path& path);

}  // namespace qwenrt
