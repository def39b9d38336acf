#include "formats/safetensors_writer.h"

#include <cerrno>
#include <cstring>

#include "core/error.h"

namespace qwenrt {

SafetensorsWriter::SafetensorsWriter(std::filesystem::path path, nlohmann::json metadata)
    : path_(std::move(path)), partial_(path_.string() + ".partial"), metadata_(std::move(metadata)) {}

SafetensorsWriter::~SafetensorsWriter() {
  if (file_) {
    std::fclose(file_);
    std::error_code ec;
    std::filesystem::remove(partial_, ec);
  }
}

void SafetensorsWriter::declare(const std::string& name, DType dtype, std::vector<int64_t> shape) {
  if (file_) fail("internal: safetensors tensor '", name, "' declared after writing began");
  std::size_t n = dtype_size(dtype);
  for (int64_t d : shape) {
    if (d < 0) fail("internal: negative dimension in '", name, "'");
    n *= static_cast<std::size_t>(d);
  }
  entries_.push_back({name, dtype, std::move(shape), n});
  total_ += n;
}

void SafetensorsWriter::write_header() {
  nlohmann::json header = nlohmann::json::object();
  if (!metadata_.is_null()) header["__metadata__"] = metadata_;
  std::size_t offset = 0;
  for (const auto& e : entries_) {
    if (header.contains(e.name)) fail("internal: tensor '", e.name, "' declared twice");
    header[e.name] = {{"dtype", std::string(dtype_name(e.dtype))}, {"shape", e.shape}, {"data_offsets", {offset, offset + e.bytes}}};
    offset += e.bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // data starts 8-byte aligned, as safetensors writes it
  file_ = std::fopen(partial_.c_str(), "wb");
  if (!file_) fail(partial_.string(), ": cannot create: ", std::strerror(errno));
  uint64_t len = text.size();
  unsigned char le[8];
  for (int i = 0; i < 8; ++i) le[i] = static_cast<unsigned char>(len >> (8 * i));
  if (std::fwrite(le, 1, 8, file_) != 8 || std::fwrite(text.data(), 1, text.size(), file_) != text.size())
    fail(partial_.string(), ": write failed: ", std::strerror(errno));
}

void SafetensorsWriter::write(const std::string& name, std::span<const std::byte> bytes) {
  if (!file_) write_header();
  if (next_ >= entries_.size() || entries_[next_].name != name) fail("internal: safetensors tensor '", name, "' written out of declaration order");
  if (written_ + bytes.size() > entries_[next_].bytes)
    fail("internal: tensor '", name, "' given ", written_ + bytes.size(), " bytes, declared ", entries_[next_].bytes);
  if (!bytes.empty() && std::fwrite(bytes.data(), 1, bytes.size(), file_) != bytes.size())
    fail(partial_.string(), ": write failed: ", std::strerror(errno));
  written_ += bytes.size();
  if (written_ == entries_[next_].bytes) {
    ++next_;
    written_ = 0;
  }
}

void SafetensorsWriter::finish() {
  if (!file_) write_header();
  // Empty tensors are complete without a write.
  while (next_ < entries_.size() && entries_[next_].bytes == 0) ++next_;
  if (next_ != entries_.size()) fail("internal: ", entries_.size() - next_, " declared tensors were not written to ", path_.string());
  const bool ok = std::fflush(file_) == 0;
  std::fclose(file_);
  file_ = nullptr;
  if (!ok) fail(partial_.string(), ": write failed: ", std::strerror(errno));
  std::filesystem::rename(partial_, path_);
}

}  // namespace qwenrt
