#pragma once
// The safetensors container: an 8-byte little-endian header length, a JSON header naming each
// tensor's dtype, shape and byte range, then the raw data. Everything is validated before use.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/mapped_file.h"
#include "formats/dtype.h"

namespace qwenrt {

struct TensorInfo {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  const std::byte* data = nullptr;  // points into the mapped file
  std::size_t nbytes = 0;
  std::string file;  // for error messages

  int64_t numel() const;
  std::string shape_string() const;  // "[3, 4]"
};

// Parses and validates a whole safetensors file image (header + data). `file` names it in errors.
// Throws Error on any inconsistency: truncation, bad JSON, unknown dtype, bad shape, offsets past
// the end, overlapping or size-mismatched ranges, duplicate names.
std::vector<TensorInfo> parse_safetensors(std::span<const std::byte> image, const std::string& file);

// A mapped safetensors file with its validated tensor table.
class SafetensorsFile {
 public:
  explicit SafetensorsFile(const std::filesystem::path& path);
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const std::filesystem::path& path() const { return map_.path(); }

 private:
  MappedFile map_;
  std::vector<TensorInfo> tensors_;
};

}  // namespace qwenrt
