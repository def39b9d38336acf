#include "backend/weight_matrix.h"

#include <cstring>

#include "core/error.h"
#include "core/half.h"

namespace qwenrt {

void WeightMatrix::row_to_f32(int64_t r, float* out) const {
  const std::byte* p = data + static_cast<std::size_t>(r) * row_bytes();
  switch (dtype) {
    case DType::F32:
      std::memcpy(out, p, static_cast<std::size_t>(cols) * 4);
      return;
    case DType::BF16:
    case DType::F16:
      for (int64_t c = 0; c < cols; ++c) {
        uint16_t h;
        std::memcpy(&h, p + 2 * c, 2);
        out[c] = dtype == DType::BF16 ? bf16_to_f32(h) : f16_to_f32(h);
      }
      return;
    default:
      fail("weight matrix of dtype ", dtype_name(dtype), " cannot be read as floats");
  }
}

}  // namespace qwenrt
