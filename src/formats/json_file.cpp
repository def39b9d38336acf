#include "formats/json_file.h"

#include <fstream>
#include <sstream>

#include "core/error.h"

namespace qwenrt {

nlohmann::json read_json_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path.string(), ": cannot open");
  std::stringstream buf;
  buf << in.rdbuf();
  try {
    return nlohmann::json::parse(buf.str());
  } catch (const nlohmann::json::exception& e) {
    fail(path.string(), ": invalid JSON: ", e.what());
  }
}

}  // namespace qwenrt
