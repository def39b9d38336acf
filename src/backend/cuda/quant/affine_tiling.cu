// MLX affine weights in 4-bit and 8-bit containers put into tensor-core tiles on the device
// (affine_tiling.h). Each thread writes one 32-bit word of the tiles (or one four-value entry of the
// table), so the writes are contiguous; the reads gather from the row-major staging copy.
#include <algorithm>
#include <cstdint>

#include "backend/cuda/quant/affine_tiles.h"
#include "backend/cuda/quant/affine_tiling.h"
#include "backend/cuda/runtime/cuda_check.h"
#include "core/error.h"

namespace qwenrt::cuda {
namespace {

namespace at = affine_tiles;

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 1 << 16;

unsigned blocks_for(int64_t n) { return static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>((n + kThreads - 1) / kThreads, kMaxBlocks))); }

// Word i of the tiles is word s of lane (g, t) of plane p of unit (tile, unit): i = (((tile · units +
// unit) · planes + p) · 32 + lane) · 4 + s (affine_tiles.h). Its eight nibbles: nibble p of the
// fields at columns 64·unit + 16s + 4t + j of rows 16·tile + g and + 8, each row's four fields read
// at once (2 bytes of 4-bit fields, 4 of 8-bit ones).
template <int Bits>
__global__ void tile_fields_kernel(const uint8_t* __restrict__ src, int64_t rows, int64_t cols, uint32_t* __restrict__ dst) {
  constexpr int kPlanes = at::planes(Bits);
  const int64_t units = cols / at::kUnitCols, words = at::tiles(rows) * units * kPlanes * 128;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; i < words; i += static_cast<int64_t>(gridDim.x) * kThreads) {
    const int s = static_cast<int>(i % 4), lane = static_cast<int>(i / 4 % 32), plane = static_cast<int>(i / 128 % kPlanes);
    const int64_t unit = i / 128 / kPlanes % units, tile = i / 128 / kPlanes / units;
    const int64_t c0 = unit * at::kUnitCols + 16 * s + 4 * (lane % 4);
    uint32_t word = 0;
    for (int h = 0; h < 2; ++h) {
      const int64_t r = tile * at::kTileRows + lane / 4 + 8 * h;
      if (r >= rows) continue;  // padding: zero fields
      const uint8_t* row = src + r * (cols * Bits / 8);
      // Fields j at bits Bits·j.
      const uint32_t four = Bits == 4 ? *reinterpret_cast<const uint16_t*>(row + c0 / 2) : *reinterpret_cast<const uint32_t*>(row + c0);
      for (int j = 0; j < 4; ++j) word |= ((four >> (Bits * j + 4 * plane)) & 0xfu) << (4 * at::nibble_in_word(j, h));
    }
    dst[i] = word;
  }
}

// Entry e of the table holds (scale, bias) of rows 16·tile + g and + 8 for one group:
// e = (tile · groups + group) · 8 + g, its values at 4e (affine_tiles.h scale_index).
template <typename V>
__global__ void tile_scales_kernel(const V* __restrict__ scales, const V* __restrict__ biases, int64_t rows, int64_t groups, V* __restrict__ dst) {
  const int64_t entries = at::tiles(rows) * groups * 8;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; e < entries; e += static_cast<int64_t>(gridDim.x) * kThreads) {
    const int64_t group = e / 8 % groups, tile = e / 8 / groups;
    for (int h = 0; h < 2; ++h) {
      const int64_t r = tile * at::kTileRows + e % 8 + 8 * h;
      dst[4 * e + 2 * h] = r < rows ? scales[r * groups + group] : V{0};
      dst[4 * e + 2 * h + 1] = r < rows ? biases[r * groups + group] : V{0};
    }
  }
}

__global__ void fill_scales_kernel(uint16_t* dst, int64_t rows, int64_t groups, uint16_t scale, uint16_t bias) {
  const int64_t entries = at::tiles(rows) * groups * 8;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; e < entries; e += static_cast<int64_t>(gridDim.x) * kThreads) {
    const int64_t tile = e / 8 / groups;
    for (int h = 0; h < 2; ++h) {
      const bool real = tile * at::kTileRows + e % 8 + 8 * h < rows;
      dst[4 * e + 2 * h] = real ? scale : uint16_t{0};
      dst[4 * e + 2 * h + 1] = real ? bias : uint16_t{0};
    }
  }
}

template <typename V>
void launch_tile_scales(const void* scales, const void* biases, int64_t rows, int64_t groups, void* dst, cudaStream_t stream) {
  const auto kernel = tile_scales_kernel<V>;
  kernel<<<blocks_for(at::tiles(rows) * groups * 8), kThreads, 0, stream>>>(static_cast<const V*>(scales), static_cast<const V*>(biases), rows,
                                                                            groups, static_cast<V*>(dst));
}

void check_shape(int64_t rows, int64_t cols, int bits, const char* what) {
  if (rows < 1 || !at::tileable(cols) || !at::tileable_bits(bits))
    fail(what, ": ", rows, "x", cols, " ", bits, "-bit fields (4 or 8 bits, columns a multiple of ", at::kUnitCols, ")");
}

}  // namespace

void tile_affine_fields(const uint8_t* src, int64_t rows, int64_t cols, int bits, uint8_t* dst, cudaStream_t stream) {
  check_shape(rows, cols, bits, "tile_affine_fields");
  if (reinterpret_cast<uintptr_t>(src) % 4 != 0 || reinterpret_cast<uintptr_t>(dst) % 16 != 0) fail("tile_affine_fields: misaligned buffers");
  const int64_t words = at::tiles(rows) * (cols / at::kUnitCols) * at::planes(bits) * 128;
  const auto kernel = bits == 4 ? tile_fields_kernel<4> : tile_fields_kernel<8>;
  kernel<<<blocks_for(words), kThreads, 0, stream>>>(src, rows, cols, reinterpret_cast<uint32_t*>(dst));
  QWENRT_CUDA_CHECK_LAUNCH();
}

void tile_affine_scales(const void* scales, const void* biases, int value_bytes, int64_t rows, int64_t groups, void* dst, cudaStream_t stream) {
  if (rows < 1 || groups < 1 || (value_bytes != 2 && value_bytes != 4))
    fail("tile_affine_scales: ", rows, "x", groups, " values of ", value_bytes, " bytes");
  if (value_bytes == 2) launch_tile_scales<uint16_t>(scales, biases, rows, groups, dst, stream);
  else launch_tile_scales<uint32_t>(scales, biases, rows, groups, dst, stream);
  QWENRT_CUDA_CHECK_LAUNCH();
}

void fill_affine_tile_scales_bf16(void* dst, int64_t rows, int64_t groups, uint16_t scale, uint16_t bias, cudaStream_t stream) {
  if (rows < 1 || groups < 1) fail("fill_affine_tile_scales_bf16: ", rows, "x", groups, " groups");
  fill_scales_kernel<<<blocks_for(at::tiles(rows) * groups * 8), kThreads, 0, stream>>>(static_cast<uint16_t*>(dst), rows, groups, scale, bias);
  QWENRT_CUDA_CHECK_LAUNCH();
}

}  // namespace qwenrt::cuda
