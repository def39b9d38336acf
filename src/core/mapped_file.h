#pragma once
// A read-only memory map of a whole file. Checkpoint weights are used in place from the map: no
// copy of bf16/f32 data on the CPU.
#include <cstddef>
#include <filesystem>
#include <span>

namespace qwenrt {

class MappedFile {
 public:
  explicit MappedFile(const std::filesystem::path& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  std::span<const std::byte> bytes() const { return {data_, size_}; }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  const std::byte* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace qwenrt
