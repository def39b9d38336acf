#pragma once
// NumPy .npy files: float32 output for `qwenrt logits`, and reading float32/float64 arrays (the
// reference fixtures) back.
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

namespace qwenrt {

void write_npy_f32(const std::filesystem::path& path, std::span<const int64_t> shape, std::span<const float> data);

struct NpyArray {
  std::vector<int64_t> shape;
  std::vector<double> values;  // widened to double whatever the stored float type
};
NpyArray read_npy(const std::filesystem::path& path);

// The same from a whole file image; `file` names it in errors. Throws Error on anything but a
// well-formed little-endian float32/float64 C-order array whose data is exactly shape's size.
// Limits: header at most kMaxNpyHeaderBytes, at most kMaxNpyDims dimensions of at most kMaxNpyDim.
inline constexpr std::size_t kMaxNpyHeaderBytes = std::size_t{1} << 20;
inline constexpr std::size_t kMaxNpyDims = 32;
inline constexpr uint64_t kMaxNpyDim = uint64_t{1} << 40;
NpyArray parse_npy(std::span<const std::byte> image, const std::string& file);

}  // namespace qwenrt
