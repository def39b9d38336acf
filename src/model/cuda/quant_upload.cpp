#include "model/cuda/quant_upload.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <vector>

#include "backend/cuda/quant/affine_tiles.h"
#include "backend/cuda/quant/affine_tiling.h"
#include "backend/cuda/quant/random_fill.h"
#include "backend/cuda/runtime/cuda_check.h"
#include "backend/cuda/runtime/device_buffer.h"
#include "core/error.h"
#include "core/half.h"

namespace qwenrt {
namespace {

// Scales and biases stay in the checkpoint's dense format.
cuda::QuantScale quant_scale(WeightFormat f) {
  switch (f) {
    case WeightFormat::F32: return cuda::QuantScale::F32;
    case WeightFormat::F16: return cuda::QuantScale::F16;
    case WeightFormat::BF16: return cuda::QuantScale::BF16;
    default: fail("internal: quantized weight scales in ", weight_format_name(f));
  }
}

// Rows [r0, r0 + n) of an affine weight's fields, row-major in `container`-bit containers: the
// checkpoint's own bytes where the widths agree, else repacked into `buf`.
const void* affine_rows(const Weight& w, int64_t r0, int64_t n, int container, std::vector<uint8_t>& buf) {
  if (container == w.quant.bits) return reinterpret_cast<const uint8_t*>(w.data) + static_cast<std::size_t>(r0) * w.row_bytes();
  const std::size_t out_row = static_cast<std::size_t>(w.cols) * static_cast<std::size_t>(container) / 8;
  buf.resize(static_cast<std::size_t>(n) * out_row);
  for (int64_t r = 0; r < n; ++r) repack_affine_row(w, r0 + r, container, buf.data() + static_cast<std::size_t>(r) * out_row);
  return buf.data();
}

// Rows as stored (2/3/5/6 bits repacked a slice of rows at a time), scales and biases as stored.
void upload_rows(const Weight& w, int container, std::byte* data, std::byte* scales, std::byte* biases, const DeviceCopy& copy) {
  const std::size_t out_row = static_cast<std::size_t>(w.cols) * static_cast<std::size_t>(container) / 8;
  const int64_t slice = std::max<int64_t>(1, static_cast<int64_t>((std::size_t{16} << 20) / out_row));
  std::vector<uint8_t> buf;
  for (int64_t r0 = 0; r0 < w.rows; r0 += slice) {
    const int64_t n = std::min(slice, w.rows - r0);
    copy(data + static_cast<std::size_t>(r0) * out_row, affine_rows(w, r0, n, container, buf), static_cast<std::size_t>(n) * out_row);
  }
  copy(scales, w.quant.scales, static_cast<std::size_t>(w.rows) * w.group_row_bytes());
  copy(biases, w.quant.biases, static_cast<std::size_t>(w.rows) * w.group_row_bytes());
}

// The tensor-core tiles (affine_tiles.h): slices of whole 16-row tiles (~16 MB of fields) copied
// row-major to a device staging buffer, then tiled there by the GPU (affine_tiling.h).
void upload_tiles(const Weight& w, std::byte* data, std::byte* table, const DeviceCopy& copy) {
  namespace at = cuda::affine_tiles;
  const int container = affine_container_bits(w.quant.bits);
  const std::size_t row = static_cast<std::size_t>(w.cols) * static_cast<std::size_t>(container) / 8, group_row = w.group_row_bytes();
  const int64_t groups = w.cols / w.quant.group_size;
  const int value_bytes = static_cast<int>(weight_element_bytes(w.quant.scale_format));
  const int64_t slice =
      std::min(at::tiles(w.rows), std::max<int64_t>(1, static_cast<int64_t>((std::size_t{16} << 20) / (row * at::kTileRows)))) * at::kTileRows;
  cuda::DeviceBuffer stage(static_cast<std::size_t>(slice) * (row + 2 * group_row));
  std::byte* stage_fields = stage.as<std::byte>();
  std::byte* stage_scales = stage_fields + static_cast<std::size_t>(slice) * row;
  std::byte* stage_biases = stage_scales + static_cast<std::size_t>(slice) * group_row;
  std::vector<uint8_t> buf;
  for (int64_t r0 = 0; r0 < w.rows; r0 += slice) {
    const int64_t n = std::min(slice, w.rows - r0), tile0 = r0 / at::kTileRows;
    copy(stage_fields, affine_rows(w, r0, n, container, buf), static_cast<std::size_t>(n) * row);
    copy(stage_scales, w.quant.scales + static_cast<std::size_t>(r0) * group_row, static_cast<std::size_t>(n) * group_row);
    copy(stage_biases, w.quant.biases + static_cast<std::size_t>(r0) * group_row, static_cast<std::size_t>(n) * group_row);
    cuda::tile_affine_fields(
        reinterpret_cast<const uint8_t*>(stage_fields), n, w.cols, container,
        reinterpret_cast<uint8_t*>(data) + static_cast<std::size_t>(tile0 * (w.cols / at::kUnitCols) * at::unit_bytes(container)), nullptr);
    cuda::tile_affine_scales(stage_scales, stage_biases, value_bytes, n, groups,
                             table + static_cast<std::size_t>(at::table_values(r0, groups)) * static_cast<std::size_t>(value_bytes), nullptr);
  }
  QWENRT_CUDA_CHECK(cudaStreamSynchronize(nullptr));  // the staging buffer is freed next
}

// Synthetic: random fields, and the scale and bias the host's synthetic weights use (values spread
// over [-scale, scale]); in tiles the padding rows get zero scales and biases.
void upload_synthetic_affine(const Weight& w, const BoundWeight& b, const PackedParts& parts) {
  if (w.random_seed == 0) fail("internal: a quantized weight without data or seed");
  if (w.quant.scale_format != WeightFormat::BF16) fail("internal: synthetic MLX affine scales are bf16");
  cuda::fill_random_bytes(const_cast<void*>(b.data), parts.data, w.random_seed, false, nullptr);
  const uint16_t scale = f32_to_bf16(2.0f * w.random_scale / static_cast<float>((1 << w.quant.bits) - 1)), bias = f32_to_bf16(-w.random_scale);
  if (b.tiled) {
    cuda::fill_affine_tile_scales_bf16(const_cast<void*>(b.scales), w.rows, w.cols / w.quant.group_size, scale, bias, nullptr);
    return;
  }
  cuda::fill_u16(const_cast<void*>(b.scales), parts.scales / 2, scale, nullptr);
  cuda::fill_u16(const_cast<void*>(b.biases), parts.biases / 2, bias, nullptr);
}

// FP8 tile rows the weight's rows touch.
int64_t first_tile_row(const Weight& w) { return w.fp8.row_offset / w.fp8.block_rows; }
int64_t tile_rows(const Weight& w) { return (w.fp8.row_offset + w.rows + w.fp8.block_rows - 1) / w.fp8.block_rows - first_tile_row(w); }

}  // namespace

void repack_affine_row(const Weight& w, int64_t r, int container, uint8_t* out) {
  const int bits = w.quant.bits;
  const uint32_t mask = (1u << bits) - 1;
  const auto* in = reinterpret_cast<const uint8_t*>(w.data) + static_cast<std::size_t>(r) * w.row_bytes();
  std::fill(out, out + w.cols * container / 8, uint8_t{0});
  for (int64_t c = 0; c < w.cols; ++c) {
    // Element c's field at bit c·bits, LSB first (as Weight::row_to_f32 reads it).
    const int64_t bit = c * bits;
    const int sh = static_cast<int>(bit & 7);
    uint32_t v = in[bit >> 3];
    if (sh + bits > 8) v |= static_cast<uint32_t>(in[(bit >> 3) + 1]) << 8;
    const uint32_t q = (v >> sh) & mask;
    if (container == 8) out[c] = static_cast<uint8_t>(q);
    else out[c >> 1] = static_cast<uint8_t>(out[c >> 1] | (q << ((c & 1) * 4)));
  }
}

bool uploads_tiled(const Weight& w, bool allow_tiles) {
  return allow_tiles && w.format == WeightFormat::MlxAffine && cuda::affine_tiles::tileable_bits(affine_container_bits(w.quant.bits)) &&
         cuda::affine_tiles::tileable(w.cols);
}

PackedParts packed_parts(const Weight& w, bool allow_tiles) {
  const auto rows = static_cast<std::size_t>(w.rows), cols = static_cast<std::size_t>(w.cols);
  if (w.format == WeightFormat::MlxAffine) {
    check_affine_params(w.quant.bits, w.quant.group_size, "--device cuda");
    if (w.cols % w.quant.group_size != 0) fail("--device cuda: an MLX affine weight of ", w.cols, " columns in groups of ", w.quant.group_size);
    const int64_t groups = w.cols / w.quant.group_size;
    const std::size_t value_bytes = weight_element_bytes(w.quant.scale_format);
    if (uploads_tiled(w, allow_tiles))
      return {static_cast<std::size_t>(cuda::affine_tiles::field_bytes(w.rows, w.cols, affine_container_bits(w.quant.bits))),
              static_cast<std::size_t>(cuda::affine_tiles::table_values(w.rows, groups)) * value_bytes, 0};
    const std::size_t group_bytes = rows * static_cast<std::size_t>(groups) * value_bytes;
    return {rows * cols * static_cast<std::size_t>(affine_container_bits(w.quant.bits)) / 8, group_bytes, group_bytes};
  }
  if (w.format == WeightFormat::Fp8Block) {
    if (w.cols % 16 != 0 || w.fp8.block_cols % 16 != 0)
      fail("--device cuda: an FP8 weight of ", w.rows, "x", w.cols, " in ", w.fp8.block_rows, "x", w.fp8.block_cols,
           " blocks (the GPU kernels take columns and block columns in multiples of 16); use --device cpu");
    return {rows * cols, static_cast<std::size_t>(tile_rows(w) * w.fp8.scale_cols) * sizeof(float), 0};
  }
  fail("internal: packed_parts of a dense weight");
}

BoundWeight upload_packed(const Weight& w, bool allow_tiles, std::byte* data, std::byte* scales, std::byte* biases, const DeviceCopy& copy) {
  const PackedParts parts = packed_parts(w, allow_tiles);
  BoundWeight b;
  b.format = w.format;
  b.data = data;
  b.scales = scales;
  if (w.format == WeightFormat::MlxAffine) {
    b.bits = affine_container_bits(w.quant.bits);
    b.group_size = w.quant.group_size;
    b.scale_format = w.quant.scale_format;
    b.tiled = uploads_tiled(w, allow_tiles);
    if (!b.tiled) b.biases = biases;
    if (!w.data) {
      upload_synthetic_affine(w, b, parts);
      return b;
    }
    if (b.tiled) upload_tiles(w, data, scales, copy);
    else upload_rows(w, b.bits, data, scales, biases, copy);
    return b;
  }
  // FP8: the tile rows this weight's rows touch, widened to f32.
  b.block_rows = w.fp8.block_rows;
  b.block_cols = w.fp8.block_cols;
  b.scale_cols = w.fp8.scale_cols;
  b.row_offset = fp8_device_row_offset(w);
  b.scale_format = WeightFormat::F32;
  const std::size_t tiles = parts.scales / sizeof(float);
  if (!w.data) {
    if (w.random_seed == 0) fail("internal: a quantized weight without data or seed");
    cuda::fill_random_bytes(data, parts.data, w.random_seed, true, nullptr);
    cuda::fill_f32(reinterpret_cast<float*>(scales), tiles, bf16_to_f32(f32_to_bf16(w.random_scale / 448.0f)), nullptr);
    return b;
  }
  copy(data, w.data, parts.data);
  const std::vector<float> s = fp8_tile_scales(w);
  copy(scales, s.data(), parts.scales);
  return b;
}

std::vector<float> fp8_tile_scales(const Weight& w) {
  std::vector<float> s(static_cast<std::size_t>(tile_rows(w) * w.fp8.scale_cols));
  const int64_t t0 = first_tile_row(w);
  for (int64_t tr = 0; tr < tile_rows(w); ++tr)
    for (int64_t cb = 0; cb < w.fp8.scale_cols; ++cb) {
      // Weight::fp8_scale takes a row of the view: the tile row's first row, counted in the view.
      const int64_t view_row = (t0 + tr) * w.fp8.block_rows - w.fp8.row_offset;
      s[static_cast<std::size_t>(tr * w.fp8.scale_cols + cb)] = w.fp8_scale(view_row, cb);
    }
  return s;
}

int64_t fp8_device_row_offset(const Weight& w) { return w.fp8.row_offset - first_tile_row(w) * w.fp8.block_rows; }

cuda::QuantMatrix device_quant(const Weight& w) {
  const BoundWeight& b = w.bound;
  if (!b.data || (b.format != WeightFormat::MlxAffine && b.format != WeightFormat::Fp8Block))
    fail("internal: a weight without its packed copy on the GPU");
  cuda::QuantMatrix m;
  m.data = b.data;
  m.rows = w.rows;
  m.cols = w.cols;
  m.scales = b.scales;
  if (b.format == WeightFormat::MlxAffine) {
    m.kind = b.bits == 4 ? cuda::QuantKind::Affine4 : cuda::QuantKind::Affine8;
    m.group_size = b.group_size;
    m.scale_type = quant_scale(b.scale_format);
    m.biases = b.biases;
    m.tiled = b.tiled;
  } else {
    m.kind = cuda::QuantKind::Fp8;
    m.scale_type = cuda::QuantScale::F32;
    m.block_rows = b.block_rows;
    m.block_cols = b.block_cols;
    m.scale_cols = b.scale_cols;
    m.row_offset = b.row_offset;
  }
  return m;
}

}  // namespace qwenrt
