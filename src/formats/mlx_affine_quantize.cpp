#include "formats/mlx_affine_quantize.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/error.h"
#include "core/half.h"

namespace qwenrt {

namespace {

void store(DType t, std::byte* p, int64_t i, float v) {
  switch (t) {
    case DType::F32: std::memcpy(p + 4 * i, &v, 4); return;
    case DType::F16: {
      const uint16_t h = f32_to_f16(v);
      std::memcpy(p + 2 * i, &h, 2);
      return;
    }
    case DType::BF16: {
      const uint16_t h = f32_to_bf16(v);
      std::memcpy(p + 2 * i, &h, 2);
      return;
    }
    default: fail("internal: MLX affine scales of dtype ", dtype_name(t));
  }
}

}  // namespace

void mlx_affine_quantize_row(const float* w, int64_t cols, int bits, int group_size, DType scale_dtype, uint8_t* packed, std::byte* scales,
                             std::byte* biases) {
  if (group_size <= 0 || cols % group_size != 0) fail("internal: ", cols, " columns are not a multiple of the group size ", group_size);
  const float n_bins = static_cast<float>((1 << bits) - 1);
  const float eps = 1e-7f;
  std::memset(packed, 0, static_cast<std::size_t>(cols * bits / 8));
  for (int64_t g = 0; g < cols / group_size; ++g) {
    const float* x = w + g * group_size;
    float w_min = std::numeric_limits<float>::infinity(), w_max = -w_min;
    for (int j = 0; j < group_size; ++j) {
      w_max = std::max(w_max, x[j]);
      w_min = std::min(w_min, x[j]);
    }
    const bool mask = std::abs(w_min) > std::abs(w_max);
    float scale = std::max((w_max - w_min) / n_bins, eps);
    scale = mask ? scale : -scale;
    const float edge = mask ? w_min : w_max;
    const float q0 = std::rint(edge / scale);
    float bias = 0;
    if (q0 != 0) {
      scale = edge / q0;
      bias = edge;
    }
    for (int j = 0; j < group_size; ++j) {
      const float q = std::min(std::max(std::rint((x[j] - bias) / scale), 0.0f), n_bins);
      const uint64_t bit = static_cast<uint64_t>(g * group_size + j) * static_cast<uint64_t>(bits);
      const uint32_t v = static_cast<uint32_t>(q) << (bit & 7);
      packed[bit >> 3] |= static_cast<uint8_t>(v);
      if ((bit & 7) + static_cast<uint64_t>(bits) > 8) packed[(bit >> 3) + 1] |= static_cast<uint8_t>(v >> 8);
    }
    store(scale_dtype, scales, g, scale);
    store(scale_dtype, biases, g, bias);
  }
}

}  // namespace qwenrt
