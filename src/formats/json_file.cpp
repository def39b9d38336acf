#include "formats/json_file.h"

#include "core/error.h"
#include "core/mapped_file.h"

namespace qwenrt {

void check_json_depth(std::string_view text, const std::string& what, std::size_t max_depth) {
  std::size_t depth = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) {
        fail(what, ": JSON nested more than ", max_depth, " levels deep (at byte ", i, "; limit kMaxJsonDepth in formats/json_file.h)");
      }
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
}

nlohmann::json read_json_file(const std::filesystem::path& path) {
  const std::string text = read_regular_file(path);
  check_json_depth(text, path.string());
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    fail(path.string(), ": invalid JSON: ", e.what());
  }
}

}  // namespace qwenrt
