#pragma once
// Random quantized weights on the host for the CUDA quantized-kernel tests: an MLX affine or
// block-FP8 Weight (backend/weight.h) with its storage, and its packed copy on the GPU made by the
// engine's own uploader (model/cuda/quant_upload.h).
#include <cuda_runtime_api.h>

#include <cstdint>
#include <random>
#include <vector>

#include "backend/cuda/quant/quant_matrix.h"
#include "backend/cuda/runtime/device_buffer.h"
#include "backend/weight.h"
#include "core/half.h"
#include "model/cuda/quant_upload.h"

namespace qwenrt::test {

// Scale/bias values stored in `f` (bf16, f16 or f32) as raw bytes.
inline std::vector<std::byte> stored_values(const std::vector<float>& v, WeightFormat f) {
  std::vector<std::byte> out(v.size() * (f == WeightFormat::F32 ? 4 : 2));
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (f == WeightFormat::F32) {
      std::memcpy(out.data() + 4 * i, &v[i], 4);
    } else {
      const uint16_t h = f == WeightFormat::BF16 ? f32_to_bf16(v[i]) : f32_to_f16(v[i]);
      std::memcpy(out.data() + 2 * i, &h, 2);
    }
  }
  return out;
}

struct HostQuantWeight {
  Weight w;
  std::vector<uint8_t> data;
  std::vector<std::byte> scales, biases;
};

// rows x cols MLX affine weight: random fields, scales of either sign around `scale`, biases
// around 0 (values of about ±scale·2^bits / 2).
inline HostQuantWeight random_affine(int64_t rows, int64_t cols, int bits, int group, WeightFormat scale_format, std::mt19937& rng,
                                     float scale = 0.02f) {
  HostQuantWeight h;
  h.w = {WeightFormat::MlxAffine, rows, cols, nullptr};
  h.w.quant = {bits, group, scale_format, nullptr, nullptr};
  h.data.resize(h.w.row_bytes() * static_cast<std::size_t>(rows));
  std::uniform_int_distribution<int> byte(0, 255);
  for (auto& b : h.data) b = static_cast<uint8_t>(byte(rng));
  const auto groups = static_cast<std::size_t>(rows * (cols / group));
  std::uniform_real_distribution<float> mag(0.5f, 1.5f);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const float unit = scale * 8.0f / static_cast<float>((1 << bits) - 1);  // a row's values keep about the same spread at every width
  std::vector<float> s(groups), b(groups);
  for (std::size_t i = 0; i < groups; ++i) {
    s[i] = (i % 3 == 0 ? -1.0f : 1.0f) * unit * mag(rng);
    b[i] = -s[i] * static_cast<float>((1 << bits) - 1) / 2.0f + 0.1f * scale * nd(rng);
  }
  h.scales = stored_values(s, scale_format);
  h.biases = stored_values(b, scale_format);
  h.w.data = reinterpret_cast<const std::byte*>(h.data.data());
  h.w.quant.scales = h.scales.data();
  h.w.quant.biases = h.biases.data();
  return h;
}

// rows x cols block-FP8 weight: every e4m3 code (NaN codes included unless `finite`), positive tile
// scales around `scale` / 448.
inline HostQuantWeight random_fp8(int64_t rows, int64_t cols, int block_rows, int block_cols, WeightFormat scale_format, std::mt19937& rng,
                                  bool finite = true, float scale = 0.5f) {
  HostQuantWeight h;
  h.w = {WeightFormat::Fp8Block, rows, cols, nullptr};
  h.data.resize(static_cast<std::size_t>(rows * cols));
  std::uniform_int_distribution<int> byte(0, 255);
  for (auto& b : h.data) {
    b = static_cast<uint8_t>(byte(rng));
    if (finite && (b & 0x7f) == 0x7f) b &= 0xfe;
  }
  const int64_t gr = (rows + block_rows - 1) / block_rows, gc = (cols + block_cols - 1) / block_cols;
  std::uniform_real_distribution<float> mag(0.5f, 2.0f);
  std::vector<float> s(static_cast<std::size_t>(gr * gc));
  for (auto& v : s) v = scale / 448.0f * mag(rng);
  h.scales = stored_values(s, scale_format);
  h.w.data = reinterpret_cast<const std::byte*>(h.data.data());
  h.w.fp8 = {block_rows, block_cols, scale_format, h.scales.data(), gc, 0};
  return h;
}

// A weight's packed copy on the GPU, bound into `w.bound` by the engine's uploader; 4-bit weights in
// the decode kernel's tensor-core tiles where they fit, unless `allow_tiles` is false (the
// row-major layout MoE stacks keep).
struct DeviceQuantWeight {
  cuda::DeviceBuffer data, scales, biases;
};

inline DeviceQuantWeight upload(Weight& w, bool allow_tiles = true) {
  const PackedParts parts = packed_parts(w, allow_tiles);
  DeviceQuantWeight d{cuda::DeviceBuffer(parts.data), cuda::DeviceBuffer(std::max<std::size_t>(parts.scales, 16)),
                      cuda::DeviceBuffer(std::max<std::size_t>(parts.biases, 16))};
  w.bound = upload_packed(w, allow_tiles, d.data.as<std::byte>(), d.scales.as<std::byte>(), d.biases.as<std::byte>(),
                          [](std::byte* dst, const void* src, std::size_t n) { QWENRT_CUDA_CHECK(cudaMemcpy(dst, src, n, cudaMemcpyHostToDevice)); });
  QWENRT_CUDA_CHECK(cudaDeviceSynchronize());
  return d;
}

}  // namespace qwenrt::test
