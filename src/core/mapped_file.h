#pragma once
// A read-only memory map of a whole file. Checkpoint weights are used in place from the map: no
// copy of bf16/f32 data on the CPU.
#include <cstddef>
#include <filesystem>
#include <span>
#include <string>

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

// Reads a whole regular file into memory (JSON, prompts, requests). Anything that is not a regular
// file (a directory, a FIFO, a device) is an Error naming the path, found without blocking: a FIFO
// is opened non-blocking and rejected. Files over `max_bytes` are an Error naming the limit.
inline constexpr std::size_t kMaxTextFileBytes = std::size_t{1} << 30;  // 1 GiB
std::string read_regular_file(const std::filesystem::path& path, std::size_t max_bytes = kMaxTextFileBytes);

}  // namespace qwenrt
