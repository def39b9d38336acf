#pragma once
// A weight matrix as the model sees it: [rows, cols] row-major, y = x · Wᵀ, stored in the
// checkpoint's own element type. A view: the bytes belong to the mapped checkpoint (or to the
// synthetic-weight arena), and a slice (one expert of a fused tensor) is just an offset view.
#include <cstddef>
#include <cstdint>

#include "formats/dtype.h"

namespace qwenrt {

struct WeightMatrix {
  DType dtype = DType::BF16;
  int64_t rows = 0, cols = 0;
  const std::byte* data = nullptr;
  // Synthetic weights made on a device: no host data, uniform noise in [−random_scale,
  // random_scale] from this seed (nonzero) wherever the matrix is uploaded.
  uint64_t random_seed = 0;
  float random_scale = 0;

  std::size_t row_bytes() const { return static_cast<std::size_t>(cols) * dtype_size(dtype); }
  std::size_t bytes() const { return row_bytes() * static_cast<std::size_t>(rows); }
  // Rows [begin, begin + count) as a matrix of their own.
  WeightMatrix row_slice(int64_t begin, int64_t count) const {
    return {dtype, count, cols, data + static_cast<std::size_t>(begin) * row_bytes()};
  }
  // Row r widened to f32.
  void row_to_f32(int64_t r, float* out) const;
};

}  // namespace qwenrt
