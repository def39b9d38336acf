#include "model/cuda/quant_upload.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <vector>

#include "backend/cuda/quant/random_fill.h"
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

PackedParts packed_parts(const Weight& w) {
  const auto rows = static_cast<std::size_t>(w.rows), cols = static_cast<std::size_t>(w.cols);
  if (w.format == WeightFormat::MlxAffine) {
    check_affine_params(w.quant.bits, w.quant.group_size, "--device cuda");
    if (w.cols % w.quant.group_size != 0) fail("--device cuda: an MLX affine weight of ", w.cols, " columns in groups of ", w.quant.group_size);
    const std::size_t groups = rows * (cols / static_cast<std::size_t>(w.quant.group_size)) * weight_element_bytes(w.quant.scale_format);
    return {rows * cols * static_cast<std::size_t>(affine_container_bits(w.quant.bits)) / 8, groups, groups};
  }
  if (w.format == WeightFormat::Fp8Block) {
    if (w.cols % 16 != 0 || w.fp8.block_cols % 16 != 0)
      fail("--device cuda: an FP8 weight of ", w.rows, "x", w.cols, " in ", w.fp8.block_rows, "x", w.fp8.block_cols,
           " blocks (the GPU kernels take columns and block columns in multiples of 16); use --device cpu");
    return {rows * cols, static_cast<std::size_t>(tile_rows(w) * w.fp8.scale_cols) * sizeof(float), 0};
  }
  fail("internal: packed_parts of a dense weight");
}

BoundWeight upload_packed(const Weight& w, std::byte* data, std::byte* scales, std::byte* biases, const DeviceCopy& copy) {
  const PackedParts parts = packed_parts(w);
  BoundWeight b;
  b.format = w.format;
  b.data = data;
  b.scales = scales;
  if (w.format == WeightFormat::MlxAffine) {
    b.biases = biases;
    b.bits = affine_container_bits(w.quant.bits);
    b.group_size = w.quant.group_size;
    b.scale_format = w.quant.scale_format;
    if (!w.data) {
      // Synthetic: random fields, and the scale and bias the host's synthetic weights use (values
      // spread over [-scale, scale]).
      if (w.random_seed == 0) fail("internal: a quantized weight without data or seed");
      if (w.quant.scale_format != WeightFormat::BF16) fail("internal: synthetic MLX affine scales are bf16");
      cuda::fill_random_bytes(data, parts.data, w.random_seed, false, nullptr);
      const std::size_t groups = parts.scales / 2;
      cuda::fill_u16(scales, groups, f32_to_bf16(2.0f * w.random_scale / static_cast<float>((1 << w.quant.bits) - 1)), nullptr);
      cuda::fill_u16(biases, groups, f32_to_bf16(-w.random_scale), nullptr);
      return b;
    }
    if (b.bits == w.quant.bits) {
      copy(data, w.data, parts.data);
    } else {
      // Repacked a slice of rows at a time.
      const std::size_t out_row = static_cast<std::size_t>(w.cols) * static_cast<std::size_t>(b.bits) / 8;
      const int64_t slice = std::max<int64_t>(1, static_cast<int64_t>((std::size_t{16} << 20) / out_row));
      std::vector<uint8_t> buf(static_cast<std::size_t>(slice) * out_row);
      for (int64_t r0 = 0; r0 < w.rows; r0 += slice) {
        const int64_t n = std::min(slice, w.rows - r0);
        for (int64_t r = 0; r < n; ++r) repack_affine_row(w, r0 + r, b.bits, buf.data() + static_cast<std::size_t>(r) * out_row);
        copy(data + static_cast<std::size_t>(r0) * out_row, buf.data(), static_cast<std::size_t>(n) * out_row);
      }
    }
    copy(scales, w.quant.scales, parts.scales);
    copy(biases, w.quant.biases, parts.biases);
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
