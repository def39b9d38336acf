#pragma once
// NumPy .npy files: float32 output for `qwenrt logits`, and reading float32/float64 arrays (the
// reference fixtures) back.
#include <cstdint>
#include <filesystem>
#include <span>
#include <vector>

namespace qwenrt {

void write_npy_f32(const std::filesystem::path& path, std::span<const int64_t> shape, std::span<const float> data);

struct NpyArray {
  std::vector<int64_t> shape;
  std::vector<double> values;  // widened to double whatever the stored float type
};
NpyArray read_npy(const std::filesystem::path& path);

}  // namespace qwenrt
