#include "formats/json_file.h"

#include "core/error.h"
#include "core/mapped_file.h"

namespace qwenrt {

nlohmann::json read_json_file(const std::filesystem::path& path) {
  const std::string text = read_regular_file(path);
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    fail(path.string(), ": invalid JSON: ", e.what());
  }
}

}  // namespace qwenrt
