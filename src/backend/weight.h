#pragma once
// A weight as every backend sees it: (format, shape, storage). A matrix is [rows, cols] row-major
// and products compute y = x · Wᵀ. `data` is the host storage in the weight's own format (a view
// into the mapped checkpoint or the synthetic-weight arena; a slice such as one expert of a fused
// tensor is an offset view). A backend that keeps weights elsewhere binds each one once, at load,
// and records where in `bound`; products dispatch on the format there (the CPU: one file per
// format, backend/cpu/matmul_<format>.cpp; CUDA: bf16, or packed as model/cuda/quant_upload.h
// says). The quantized formats enter here, beside the dense ones, without the model changing.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "formats/dtype.h"

namespace qwenrt {

enum class WeightFormat : uint8_t {
  F32,        // dense float32
  F16,        // dense IEEE half
  BF16,       // dense bfloat16
  MlxAffine,  // MLX affine quantized: packed uint32 words + per-group scales and biases (Weight::quant)
  Fp8Block,   // float8 e4m3 bytes + one scale per [block_rows, block_cols] tile (Weight::fp8; Qwen's FP8)
};

std::string_view weight_format_name(WeightFormat f);
// The dense format of a checkpoint element type; Error for types no product reads.
WeightFormat weight_format_of(DType t);
// Bytes of one stored element (dense formats).
std::size_t weight_element_bytes(WeightFormat f);

// The parameters of an MLX affine quantized matrix (mlx.core.quantize, mode "affine"). Row r's
// element j is the unsigned `bits`-wide field at bit j·bits of the row's little-endian bitstream
// (LSB first over consecutive uint32 words), and its value is fma(scale, q, bias) in f32 with the
// scale and bias of group j / group_size of that row. cols is a multiple of group_size.
struct AffineQuant {
  int bits = 0;                                    // 2, 3, 4, 5, 6 or 8
  int group_size = 0;                              // 32, 64 or 128
  WeightFormat scale_format = WeightFormat::BF16;  // dense format of scales and biases
  const std::byte* scales = nullptr;               // [rows, cols / group_size]
  const std::byte* biases = nullptr;               // [rows, cols / group_size]
};

// Checks bits and group size (Error naming `what` otherwise).
void check_affine_params(int bits, int group_size, const std::string& what);

// The parameters of a block-scaled FP8 matrix (Qwen's and DeepSeek's "fine-grained FP8", transformers'
// quant_method "fp8"): element (r, c) is one float8 e4m3fn byte q, and its value is
// fl32(e4m3(q) · scale) with the scale of tile (r / block_rows, c / block_cols) of a row-major
// [ceil(rows / block_rows), ceil(cols / block_cols)] grid (the checkpoint's `weight_scale_inv`, a
// multiplier despite its name). `row_offset` is where this view's row 0 sits in the grid's rows (a
// row slice keeps the scales of the rows it came from).
struct BlockFp8 {
  int block_rows = 0, block_cols = 0;
  WeightFormat scale_format = WeightFormat::BF16;  // bf16 (Qwen), f16 or f32 (DeepSeek)
  const std::byte* scales = nullptr;
  int64_t scale_cols = 0;  // ceil(cols / block_cols)
  int64_t row_offset = 0;
};

// The value of one float8 e4m3fn byte (exact in f32). The NaN codes 0x7f and 0xff, which a quantizer
// that clamps to ±448 never writes, read as ±480 (`qwenrt info --check` reports them).
float fp8_e4m3_to_f32(uint8_t q);

// Where a backend other than the CPU keeps a weight (set once when the model moves there).
struct BoundWeight {
  WeightFormat format = WeightFormat::BF16;  // may differ from the host's (f16/f32 rounded at upload)
  const void* data = nullptr;
  // Quantized formats, kept packed (the CUDA backend: model/cuda/quant_upload.h).
  // MlxAffine: `bits`-wide containers (4 or 8: 2/3-bit weights repacked into 4, 5/6-bit into 8, the
  // same values), `scales` and `biases` of `scale_format` per `group_size` as in the checkpoint.
  // `tiled` (4-bit and 8-bit containers): fields, scales and biases in the decode kernel's tensor-core tiles
  // (backend/cuda/quant/affine_tiles.h; scales and biases interleaved in `scales`) instead of rows.
  // Fp8Block: f32 tile `scales`, `scale_cols` per tile row, this weight's row 0 at row `row_offset`
  // of the first tile row.
  const void* scales = nullptr;
  const void* biases = nullptr;
  int bits = 0, group_size = 0;
  bool tiled = false;
  WeightFormat scale_format = WeightFormat::BF16;
  int block_rows = 0, block_cols = 0;
  int64_t scale_cols = 0, row_offset = 0;
};

struct Weight {
  WeightFormat format = WeightFormat::BF16;
  int64_t rows = 0, cols = 0;
  const std::byte* data = nullptr;
  // Synthetic weights made on a device: no host data, uniform noise in [−random_scale,
  // random_scale] from this seed (nonzero) wherever the matrix is uploaded.
  uint64_t random_seed = 0;
  float random_scale = 0;
  BoundWeight bound{};
  AffineQuant quant{};  // format == MlxAffine only
  BlockFp8 fp8{};       // format == Fp8Block only

  bool quantized() const { return format == WeightFormat::MlxAffine || format == WeightFormat::Fp8Block; }
  // Bytes of one row of `data` (the packed words of an MLX affine matrix, one byte per FP8 element).
  std::size_t row_bytes() const {
    if (format == WeightFormat::MlxAffine) return static_cast<std::size_t>(cols) * static_cast<std::size_t>(quant.bits) / 8;
    if (format == WeightFormat::Fp8Block) return static_cast<std::size_t>(cols);
    return static_cast<std::size_t>(cols) * weight_element_bytes(format);
  }
  // Bytes of one row of scales (and of biases) of an MLX affine matrix.
  std::size_t group_row_bytes() const {
    return format == WeightFormat::MlxAffine ? static_cast<std::size_t>(cols / quant.group_size) * weight_element_bytes(quant.scale_format) : 0;
  }
  // All bytes a product streams: data, plus scales and biases (MLX affine) or the scale tiles the
  // rows touch (FP8).
  std::size_t bytes() const {
    if (format == WeightFormat::Fp8Block) {
      const int64_t first = fp8.row_offset / fp8.block_rows, last = (fp8.row_offset + rows + fp8.block_rows - 1) / fp8.block_rows;
      return row_bytes() * static_cast<std::size_t>(rows) +
             static_cast<std::size_t>((last - first) * fp8.scale_cols) * weight_element_bytes(fp8.scale_format);
    }
    return (row_bytes() + 2 * group_row_bytes()) * static_cast<std::size_t>(rows);
  }
  // Rows [begin, begin + count) as a weight of their own.
  Weight row_slice(int64_t begin, int64_t count) const {
    Weight w = *this;
    w.rows = count;
    if (data) w.data = data + static_cast<std::size_t>(begin) * row_bytes();
    if (format == WeightFormat::MlxAffine) {
      w.quant.scales += static_cast<std::size_t>(begin) * group_row_bytes();
      w.quant.biases += static_cast<std::size_t>(begin) * group_row_bytes();
    }
    if (format == WeightFormat::Fp8Block) w.fp8.row_offset += begin;
    w.bound = {};
    return w;
  }
  // The FP8 scale of row r's column block cb, as f32.
  float fp8_scale(int64_t r, int64_t cb) const;
  // Row r widened (dense) or dequantized (MLX affine: fma(scale, q, bias) in f32; FP8:
  // e4m3(q) · scale in f32) to f32.
  void row_to_f32(int64_t r, float* out) const;
};

// A small parameter vector (norm weights, gates, conv taps): f32 on the host, widened at load, and
// where the backend keeps its copy.
struct ParamVector {
  std::vector<float> host;
  const float* bound = nullptr;

  ParamVector() = default;
  ParamVector(std::vector<float> v) : host(std::move(v)) {}  // NOLINT: a vector is a parameter
  const float* data() const { return host.data(); }
  float* data() { return host.data(); }
  std::size_t size() const { return host.size(); }
  bool empty() const { return host.empty(); }
  float operator[](std::size_t i) const { return host[i]; }
};

}  // namespace qwenrt
