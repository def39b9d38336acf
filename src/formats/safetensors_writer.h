#pragma once
// Writes a safetensors file tensor by tensor, so a converted checkpoint never has to be held in
// memory: every tensor is declared first (name, dtype, shape), the header is written, then each
// tensor's bytes in declaration order. The file is written under a temporary name and renamed when
// complete, so a failed conversion leaves no file that looks whole.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "formats/dtype.h"

namespace qwenrt {

class SafetensorsWriter {
 public:
  // `metadata`: the header's "__metadata__" (string values), e.g. {"format": "mlx"}.
  SafetensorsWriter(std::filesystem::path path, nlohmann::json metadata);
  ~SafetensorsWriter();
  SafetensorsWriter(const SafetensorsWriter&) = delete;
  SafetensorsWriter& operator=(const SafetensorsWriter&) = delete;

  void declare(const std::string& name, DType dtype, std::vector<int64_t> shape);
  // Bytes of the next declared tensor, in one call or in consecutive parts that add up to its
  // size (the header is written on the first call).
  void write(const std::string& name, std::span<const std::byte> bytes);
  // Checks every declared tensor was written and moves the file into place.
  void finish();

  std::size_t data_bytes() const { return total_; }

 private:
  struct Entry {
    std::string name;
    DType dtype;
    std::vector<int64_t> shape;
    std::size_t bytes;
  };
  void write_header();

  std::filesystem::path path_, partial_;
  nlohmann::json metadata_;
  std::vector<Entry> entries_;
  std::size_t next_ = 0, written_ = 0, total_ = 0;  // written_: bytes of entries_[next_] so far
  std::FILE* file_ = nullptr;
};

}  // namespace qwenrt
