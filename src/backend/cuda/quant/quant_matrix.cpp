// QuantMatrix's byte count and the checks every quantized kernel makes (quant_matrix.h).
#include "backend/cuda/quant/quant_matrix.h"

#include <cstddef>

#include "backend/cuda/quant/affine_tiles.h"
#include "core/error.h"

namespace qwenrt::cuda {

int64_t quant_matrix_bytes(const QuantMatrix& m) {
  if (m.kind == QuantKind::Fp8) {
    const int64_t first = m.row_offset / m.block_rows, last = (m.row_offset + m.rows + m.block_rows - 1) / m.block_rows;
    return m.rows * m.row_bytes() + (last - first) * m.scale_cols * 4;
  }
  const int64_t scale_bytes = m.scale_type == QuantScale::F32 ? 4 : 2;
  if (m.tiled)
    return affine_tiles::field_bytes(m.rows, m.cols, m.container_bits()) + affine_tiles::table_values(m.rows, m.cols / m.group_size) * scale_bytes;
  return m.rows * (m.row_bytes() + 2 * (m.cols / m.group_size) * scale_bytes);
}

void check_quant_matrix(const QuantMatrix& m, const char* what) {
  if (!m.data || !m.scales || m.rows < 1 || m.cols < 16) fail(what, ": a quantized weight without data or scales, or of shape ", m.rows, "x", m.cols);
  if (reinterpret_cast<uintptr_t>(m.data) % 16 != 0) fail(what, ": quantized weights are not 16-byte aligned");
  const int per_load = m.elements_per_load();
  if (m.cols % per_load != 0) fail(what, ": a quantized weight of ", m.cols, " columns (the GPU kernels take multiples of ", per_load, ")");
  if (m.tiled) {
    // A lane reads a group's four table values with one aligned load.
    const int entry_bytes = 4 * (m.scale_type == QuantScale::F32 ? 4 : 2);
    if (m.kind == QuantKind::Fp8 || !affine_tiles::tileable(m.cols) || reinterpret_cast<uintptr_t>(m.scales) % entry_bytes != 0)
      fail(what, ": tiled quantized weights are 4-bit or 8-bit affine with columns a multiple of ", affine_tiles::kUnitCols, " and aligned scales");
  }
  if (m.kind == QuantKind::Fp8) {
    if (m.block_rows < 1 || m.block_cols < 16 || m.block_cols % 16 != 0 || m.row_offset < 0 ||
        m.scale_cols != (m.cols + m.block_cols - 1) / m.block_cols)
      fail(what, ": FP8 blocks of ", m.block_rows, "x", m.block_cols, " (the GPU kernels take block columns a multiple of 16)");
    return;
  }
  if ((m.group_size != 32 && m.group_size != 64 && m.group_size != 128) || m.cols % m.group_size != 0)
    fail(what, ": MLX affine group size ", m.group_size, " for ", m.cols, " columns (32, 64 or 128 dividing the columns)");
  if (!m.tiled && !m.biases) fail(what, ": an MLX affine weight without biases");
}

}  // namespace qwenrt::cuda
