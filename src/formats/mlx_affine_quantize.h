#pragma once
// MLX affine quantization of one row, computed exactly as mlx.core.quantize (mode "affine") does it
// on the CPU (mlx/backend/cpu/quantized.cpp, `quantize`): per group of `group_size` values, in f32,
//   scale = max((max - min) / (2^bits - 1), 1e-7), negated unless |min| > |max|;
//   edge = min if |min| > |max| else max; q0 = rint(edge / scale);
//   if q0 != 0: scale = edge / q0, bias = edge, else bias = 0;
//   q = clamp(rint((w - bias) / scale), 0, 2^bits - 1),
// the q packed LSB first into a little-endian bitstream, and scale and bias rounded to the storage
// dtype only when stored (the q use the f32 values). The inputs are the row's values in that
// storage dtype, given as f32.
#include <cstddef>
#include <cstdint>

#include "formats/dtype.h"

namespace qwenrt {

// packed: cols·bits/8 bytes; scales, biases: cols/group_size elements of `scale_dtype` (BF16, F16
// or F32). cols must be a multiple of group_size.
void mlx_affine_quantize_row(const float* w, int64_t cols, int bits, int group_size, DType scale_dtype, uint8_t* packed, std::byte* scales,
                             std::byte* biases);

}  // namespace qwenrt
