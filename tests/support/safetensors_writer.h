#pragma once
// Builds safetensors images in memory for tests (valid ones, then corrupted on purpose).
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace qwenrt::test {

struct TensorSpec {
  std::string name;
  std::string dtype;  // "BF16", "F32", ...
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

inline std::vector<uint8_t> safetensors_image(const std::vector<TensorSpec>& tensors, const nlohmann::json& extra_header = {}) {
  nlohmann::json header = extra_header.is_object() ? extra_header : nlohmann::json::object();
  std::vector<uint8_t> data;
  for (const auto& t : tensors) {
    header[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {data.size(), data.size() + t.bytes.size()}}};
    data.insert(data.end(), t.bytes.begin(), t.bytes.end());
  }
  std::string h = header.dump();
  std::vector<uint8_t> image(8);
  uint64_t n = h.size();
  for (int i = 0; i < 8; ++i) image[i] = static_cast<uint8_t>(n >> (8 * i));
  image.insert(image.end(), h.begin(), h.end());
  image.insert(image.end(), data.begin(), data.end());
  return image;
}

inline void write_file(const std::filesystem::path& p, const std::vector<uint8_t>& bytes) {
  std::ofstream out(p, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

inline void write_text(const std::filesystem::path& p, const std::string& s) {
  std::ofstream out(p, std::ios::binary);
  out << s;
}

}  // namespace qwenrt::test
