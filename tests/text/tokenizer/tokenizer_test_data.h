#pragma once
// Paths and readers for the tokenizer test data (tests/data/tokenizer/, see its README.md), read
// from the build tree's copy with the Qwen3 tokenizer.json unpacked (cmake/test_data.cmake).
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "text/tokenizer/tokenizer.h"

namespace qwenrt::test {

inline std::filesystem::path tokenizer_data_dir() { return std::filesystem::path(QWENRT_TOKENIZER_DATA_DIR); }

// Each line of a .jsonl file, parsed.
inline std::vector<nlohmann::json> read_jsonl(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path.string());
  std::vector<nlohmann::json> rows;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty()) rows.push_back(nlohmann::json::parse(line));
  }
  return rows;
}

// Loaded once per test binary: parsing the 11 MB tokenizer.json takes a noticeable moment.
inline const text::Tokenizer& qwen3_tokenizer() {
  static const text::Tokenizer tok = text::Tokenizer::load(tokenizer_data_dir() / "qwen3");
  return tok;
}

}  // namespace qwenrt::test
