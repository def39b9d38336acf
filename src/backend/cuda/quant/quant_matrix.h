#pragma once
// A quantized weight matrix as the CUDA kernels read it (model/cuda/cuda_weights binds it at load):
//
//   Affine4 / Affine8: MLX affine values in 4-bit or 8-bit containers: row r's element c is the
//     unsigned field at bit c·bits of the row's little-endian bitstream (bits = 4 or 8), valued
//     fma(scale, q, bias) in f32 with the scale and bias of group c / group_size of row r (scales and
//     biases [rows, cols / group_size] in bf16, f16 or f32, as the checkpoint stores them). 2/3-bit
//     checkpoints are repacked into 4-bit containers at load and 5/6-bit into 8-bit ones (the same q,
//     scales and biases: affine_repack.h), so a kernel's shifts are fixed.
//   Fp8: one float8 e4m3fn byte per element, valued fl32(e4m3(q) · scale) with the f32 scale of tile
//     ((row_offset + r) / block_rows, c / block_cols) of `scales` ([.., scale_cols] row-major).
//
// Rows are `row_bytes()` apart and 16-byte aligned (cols a multiple of 32 for Affine4, of 16 for
// Affine8 and Fp8): the kernels load 16 bytes per lane.
//
// `tiled` (Affine4 and Affine8, cols a multiple of 64): the fields and the scales are in the
// tensor-core tile layout instead (affine_tiles.h: 16-row tiles of 64-column units, 8-bit fields as
// two planes of nibbles, rows padded to 16; scales and biases interleaved in one table at `scales`,
// `biases` unused), made at upload for the decode kernel skinny_quant_affine_tiles; row_bytes()
// does not apply. MoE expert stacks stay row-major.
#include <cstdint>

namespace qwenrt::cuda {

enum class QuantKind : uint8_t { Affine4, Affine8, Fp8 };
enum class QuantScale : uint8_t { BF16, F16, F32 };

struct QuantMatrix {
  QuantKind kind = QuantKind::Affine4;
  bool tiled = false;  // Affine4 / Affine8: the tensor-core tile layout (above)
  const void* data = nullptr;
  int64_t rows = 0, cols = 0;
  // Affine
  int group_size = 0;
  QuantScale scale_type = QuantScale::BF16;
  const void* scales = nullptr;  // Affine: [rows, cols / group_size] (tiled: the interleaved table); Fp8: f32 tiles
  const void* biases = nullptr;
  // Fp8
  int block_rows = 0, block_cols = 0;
  int64_t scale_cols = 0;
  int64_t row_offset = 0;

  constexpr int64_t row_bytes() const { return kind == QuantKind::Affine4 ? cols / 2 : cols; }
  // Affine: bits of a field's container (4 or 8).
  constexpr int container_bits() const { return kind == QuantKind::Affine4 ? 4 : 8; }
  // Elements one 16-byte load holds.
  constexpr int elements_per_load() const { return kind == QuantKind::Affine4 ? 32 : 16; }
};

// Bytes a product streams: the packed rows, scales and biases (affine; tiled: of the padded rows),
// the scale tiles (FP8).
int64_t quant_matrix_bytes(const QuantMatrix& m);

// Error naming `what` unless the shape, alignment and parameters suit the kernels.
void check_quant_matrix(const QuantMatrix& m, const char* what);

}  // namespace qwenrt::cuda
