#pragma once
// Quantized weights on the GPU, kept packed (model/cuda/cuda_weights binds every matrix through
// here or as bf16): MLX affine words in 4-bit or 8-bit containers (4 and 8 bits copied as they are;
// 2/3-bit repacked at load into 4-bit containers and 5/6-bit into 8-bit ones, the same q, scales
// and biases, so the kernels' shifts are fixed), scales and biases as stored, both containers in
// tensor-core tiles where the caller allows (uploads_tiled); FP8 e4m3 bytes as stored with their
// tile scales widened to f32 (exact). Synthetic weights (a seed, no host data) are made on the
// device.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "backend/cuda/quant/quant_matrix.h"
#include "backend/weight.h"

namespace qwenrt {

// The container bits an MLX affine weight of `bits` runs in on the GPU.
inline int affine_container_bits(int bits) { return bits <= 4 ? 4 : 8; }

// Row r of an MLX affine weight's fields (host data) in `container` bits each, LSB first:
// cols · container / 8 bytes at `out`.
void repack_affine_row(const Weight& w, int64_t r, int container, uint8_t* out);

// An FP8 weight's tile scales, widened to f32: the tile rows its rows touch, from the first, and
// where its row 0 sits in the first of them (the device copy's BoundWeight::row_offset).
std::vector<float> fp8_tile_scales(const Weight& w);
int64_t fp8_device_row_offset(const Weight& w);

// Whether w goes to the GPU in the tensor-core tiles (backend/cuda/quant/affine_tiles.h) the tiled
// decode kernel reads: an MLX affine weight (4-bit or 8-bit containers) with columns a multiple of
// 64, where the caller allows tiles (`allow_tiles`: not for MoE expert stacks, which the packed expert
// kernels read row by row).
bool uploads_tiled(const Weight& w, bool allow_tiles);

// Device bytes of a quantized weight's three parts (scales and biases 0 where absent; tiled: rows
// padded to whole tiles, scales and biases together in `scales`). Error naming the weight's format
// and shape when the GPU kernels cannot take it.
struct PackedParts {
  std::size_t data = 0, scales = 0, biases = 0;
};
PackedParts packed_parts(const Weight& w, bool allow_tiles);

// Host-to-device copy used for the packed parts (the uploader's, with its progress bar).
using DeviceCopy = std::function<void(std::byte* dst, const void* src, std::size_t bytes)>;

// Writes w's parts to the device addresses (sized by packed_parts with the same `allow_tiles`) and
// returns where they are. Tiles are made on the device from row-major slices copied to a staging
// buffer; everything runs on the legacy default stream, as `copy`'s cudaMemcpy does.
BoundWeight upload_packed(const Weight& w, bool allow_tiles, std::byte* data, std::byte* scales, std::byte* biases, const DeviceCopy& copy);

// The bound weight as the kernels take it.
cuda::QuantMatrix device_quant(const Weight& w);

}  // namespace qwenrt
