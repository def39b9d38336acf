#pragma once
// The committed oracle fixtures (tests/fixtures/<name>/, made by tools/make_fixtures.py).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "formats/json_file.h"

namespace qwenrt::test {

// The source tree the tests were built from, or $QWENRT_SOURCE_DIR where the binaries were carried
// to another machine (the GPU suite).
inline std::filesystem::path fixtures_dir() {
  const char* moved = std::getenv("QWENRT_SOURCE_DIR");
  return std::filesystem::path(moved && *moved ? moved : QWENRT_SOURCE_DIR) / "tests" / "fixtures";
}

inline std::vector<std::string> fixture_names() {
  std::vector<std::string> names;
  if (!std::filesystem::exists(fixtures_dir())) return names;
  for (const auto& e : std::filesystem::directory_iterator(fixtures_dir()))
    if (std::filesystem::exists(e.path() / "reference.json")) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

struct Reference {
  std::vector<int32_t> prompt, greedy;
  std::vector<double> greedy_margins;
};

inline Reference load_reference(const std::string& name) {
  auto j = read_json_file(fixtures_dir() / name / "reference.json");
  Reference r;
  r.prompt = j.at("prompt").get<std::vector<int32_t>>();
  r.greedy = j.at("greedy").get<std::vector<int32_t>>();
  if (j.contains("greedy_margins")) r.greedy_margins = j["greedy_margins"].get<std::vector<double>>();
  return r;
}

// ‖a − b‖ / ‖b‖ over all entries.
template <typename A, typename B>
double relative_l2(const A& a, const B& b) {
  double e = 0, n = 0;
  for (std::size_t i = 0; i < b.size(); ++i) {
    const double d = static_cast<double>(a[i]) - static_cast<double>(b[i]);
    e += d * d;
    n += static_cast<double>(b[i]) * static_cast<double>(b[i]);
  }
  return std::sqrt(e / n);
}

}  // namespace qwenrt::test
