// MLX affine 4-bit weights put into tensor-core tiles on the device (affine4_tiling.h). Each
// thread writes one 32-bit word of the tiles (or one four-value entry of the table), so the writes
// are contiguous; the reads gather from the row-major staging copy.
#include <algorithm>
#include <cstdint>

#include "backend/cuda/quant/affine4_tiles.h"
#include "backend/cuda/quant/affine4_tiling.h"
#include "backend/cuda/runtime/cuda_check.h"
#include "core/error.h"

namespace qwenrt::cuda {
namespace {

namespace at = affine4_tiles;

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 1 << 16;

unsigned blocks_for(int64_t n) { return static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>((n + kThreads - 1) / kThreads, kMaxBlocks))); }

// Word i of the tiles is word s of lane (g, t) of unit (tile, unit): i = ((tile · units + unit) · 32
// + lane) · 4 + s (affine4_tiles.h). Its eight nibbles: columns 64·unit + 16s + 4t + j of rows
// 16·tile + g and + 8, the two bytes of each row's four fields read at once.
__global__ void tile_fields_kernel(const uint8_t* __restrict__ src, int64_t rows, int64_t cols, uint32_t* __restrict__ dst) {
  const int64_t units = cols / at::kUnitCols, words = at::tiles(rows) * units * 128;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; i < words; i += static_cast<int64_t>(gridDim.x) * kThreads) {
    const int s = static_cast<int>(i % 4), lane = static_cast<int>(i / 4 % 32);
    const int64_t unit = i / 128 % units, tile = i / 128 / units;
    const int64_t c0 = unit * at::kUnitCols + 16 * s + 4 * (lane % 4);
    uint32_t word = 0;
    for (int h = 0; h < 2; ++h) {
      const int64_t r = tile * at::kTileRows + lane / 4 + 8 * h;
      if (r >= rows) continue;  // padding: zero fields
      const uint32_t four = *reinterpret_cast<const uint16_t*>(src + r * (cols / 2) + c0 / 2);  // fields j at bits 4j
      for (int j = 0; j < 4; ++j) word |= ((four >> (4 * j)) & 0xfu) << (4 * at::nibble_in_word(j, h));
    }
    dst[i] = word;
  }
}

// Entry e of the table holds (scale, bias) of rows 16·tile + g and + 8 for one group:
// e = (tile · groups + group) · 8 + g, its values at 4e (affine4_tiles.h scale_index).
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
  kernel<<<blocks_for(at::tiles(rows) * groups * 8), kThreads, 0, stream>>>(static_cast<const V*>(scales), static_cast<const V*>(biases), rows, groups, static_cast<V*>(dst));
}

void check_shape(int64_t rows, int64_t cols, const char* what) {
  if (rows < 1 || !at::tileable(cols)) fail(what, ": ", rows, "x", cols, " 4-bit fields (columns must be a multiple of ", at::kUnitCols, ")");
}

}  // namespace

void tile_affine4_fields(const uint8_t* src, int64_t rows, int64_t cols, uint8_t* dst, cudaStream_t stream) {
  check_shape(rows, cols, "tile_affine4_fields");
  if (reinterpret_cast<uintptr_t>(src) % 2 != 0 || reinterpret_cast<uintptr_t>(dst) % 16 != 0) fail("tile_affine4_fields: misaligned buffers");
  const int64_t words = at::tiles(rows) * (cols / at::kUnitCols) * 128;
  tile_fields_kernel<<<blocks_for(words), kThreads, 0, stream>>>(src, rows, cols, reinterpret_cast<uint32_t*>(dst));
  QWENRT_CUDA_CHECK_LAUNCH();
}

void tile_affine4_scales(const void* scales, const void* biases, int value_bytes, int64_t rows, int64_t groups, void* dst, cudaStream_t stream) {
  if (rows < 1 || groups < 1 || (value_bytes != 2 && value_bytes != 4)) fail("tile_affine4_scales: ", rows, "x", groups, " values of ", value_bytes, " bytes");
  if (value_bytes == 2) launch_tile_scales<uint16_t>(scales, biases, rows, groups, dst, stream);
  else launch_tile_scales<uint32_t>(scales, biases, rows, groups, dst, stream);
  QWENRT_CUDA_CHECK_LAUNCH();
}

void fill_affine4_tile_scales_bf16(void* dst, int64_t rows, int64_t groups, uint16_t scale, uint16_t bias, cudaStream_t stream) {
  if (rows < 1 || groups < 1) fail("fill_affine4_tile_scales_bf16: ", rows, "x", groups, " groups");
  fill_scales_kernel<<<blocks_for(at::tiles(rows) * groups * 8), kThreads, 0, stream>>>(static_cast<uint16_t*>(dst), rows, groups, scale, bias);
  QWENRT_CUDA_CHECK_LAUNCH();
}

}  // namespace qwenrt::cuda
