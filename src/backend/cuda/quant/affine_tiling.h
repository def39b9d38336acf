#pragma once
// MLX affine weights in 4-bit and 8-bit containers put into tensor-core tiles on the device
// (affine_tiles.h): the uploader copies a slice of row-major rows to a staging buffer and these
// kernels write the slice's tiles, so the layout is made once, at load, by the GPU
// (model/cuda/quant_upload).
#include <cuda_runtime_api.h>

#include <cstdint>

namespace qwenrt::cuda {

// `rows` row-major rows of `bits`-bit fields (4 or 8: cols · bits / 8 bytes each, cols a multiple of
// 64) at `src` into the tiles(rows) whole tiles at `dst` (the slice's first tile); the rows padding
// the last tile get zero fields.
void tile_affine_fields(const uint8_t* src, int64_t rows, int64_t cols, int bits, uint8_t* dst, cudaStream_t stream);

// `rows` row-major rows of `groups` scales and of biases (`value_bytes` = 2 or 4 each, as stored)
// into the tiles' table at `dst` (the slice's first tile); the padding rows get zeros.
void tile_affine_scales(const void* scales, const void* biases, int value_bytes, int64_t rows, int64_t groups, void* dst, cudaStream_t stream);

// A synthetic weight's table: one bf16 scale and bias for every group of rows [0, rows), zeros for
// the padding rows.
void fill_affine_tile_scales_bf16(void* dst, int64_t rows, int64_t groups, uint16_t scale, uint16_t bias, cudaStream_t stream);

}  // namespace qwenrt::cuda
