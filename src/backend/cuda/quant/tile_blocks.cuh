#pragma once
// What the tensor-core decode kernels over 16-row weight tiles share (skinny_quant_fp8.cu,
// skinny_quant_affine_tiles.cu): a block per 16-row tile of one of a launch's weights, the K split
// among the block's 8 warps, each lane holding, for each of NT n-tiles j (8 activation rows each),
// the m16n8 sums of tile rows g and g + 8 for activation rows 8j + 2t and 8j + 2t + 1 (g = lane / 4,
// t = lane % 4), the warps' sums added in warp order at the end. A row's result never depends on
// another activation row's, nor on NT: batch-invariant.
#include <cuda_runtime.h>

#include <cstdint>
#include <span>
#include <vector>

#include "backend/cuda/quant/skinny_quant_gemm.h"
#include "backend/cuda/runtime/cuda_check.h"
#include "core/error.h"

namespace qwenrt::cuda::tile_blocks {

constexpr int kWarps = 8;  // warps of a block split K between them
constexpr int kThreads = kWarps * 32;
constexpr int kTileRows = 16;  // weight rows per block: one m16 tile
// The warps' sums, [warp][j][e][lane]: the kernels' dynamic shared memory.
template <int NT>
constexpr int kRedBytes = kWarps* NT * 4 * 32 * sizeof(float);

// N-tiles a launch of n rows (1 <= n <= 32) runs: 1 up to 8 rows, 2 up to 16, else 4 (27B q4 at 16
// rows on an H100: 1,203 tok/s with two n-tiles, 879 with four: fewer sums, fewer registers).
inline int n_tiles(int n) { return n <= 8 ? 1 : n <= 16 ? 2 : 4; }

// A launch's weights and where each one's tiles start in the grid.
struct Segments {
  QuantSegment seg[kSkinnyQuantMaxSegments];
  int first_tile[kSkinnyQuantMaxSegments + 1];  // first row tile of each segment; [count] = all tiles (the grid)
  int count;
};

inline Segments segments(std::span<const QuantSegment> weights) {
  Segments s{};
  int64_t tiles = 0;
  for (const QuantSegment& w : weights) {
    s.seg[s.count] = w;
    s.first_tile[s.count] = static_cast<int>(tiles);
    tiles += (w.w.rows + kTileRows - 1) / kTileRows;
    ++s.count;
  }
  if (tiles > (int64_t{1} << 31) - 1) fail("skinny_quant_gemm: too many weight rows");
  s.first_tile[s.count] = static_cast<int>(tiles);
  return s;
}

// This block's weight (its segment) and the block's tile within that weight.
struct Place {
  const QuantSegment& seg;
  int64_t tile;
};
__device__ __forceinline__ Place place_of(const Segments& s) {
  const int tile = blockIdx.x;
  int i = 0;
  while (i + 1 < s.count && tile >= s.first_tile[i + 1]) ++i;
  return {s.seg[i], tile - s.first_tile[i]};
}

// Adds the block's 8 warps' sums y (this lane's four accumulators of each n-tile) in warp order and
// writes (or adds, seg.accumulate) the tile's outputs for the first n activation rows. `red` is the
// kernel's dynamic shared memory (kRedBytes<NT>); row0 the tile's first weight row.
template <int NT>
__device__ __forceinline__ void finish(const float (&y)[NT][4], float* red, const QuantSegment& seg, int64_t row0, int n) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
#pragma unroll
  for (int j = 0; j < NT; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) red[((warp * NT + j) * 4 + e) * 32 + lane] = y[j][e];
  __syncthreads();
  // Item (j, e, l) finishes lane l's output e of n-tile j.
  for (int item = threadIdx.x; item < NT * 4 * 32; item += kThreads) {
    const int j = item / 128, e = item / 32 % 4, l = item % 32;
    float v = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) v += red[((w * NT + j) * 4 + e) * 32 + l];
    const int64_t row = row0 + l / 4 + (e >= 2 ? 8 : 0);
    const int col = 8 * j + 2 * (l % 4) + (e & 1);
    if (col >= n || row >= seg.w.rows) continue;
    float* out = seg.y + col * seg.ldy + row;
    *out = seg.accumulate ? __fadd_rn(*out, v) : v;
  }
}

// Blocks of `kernel` the current device holds at once; remembered per (device, kernel).
inline int64_t resident_blocks(const void* kernel, int red_bytes) {
  struct Entry {
    int device;
    const void* kernel;
    int64_t blocks;
  };
  thread_local std::vector<Entry> known;
  int device = 0;
  QWENRT_CUDA_CHECK(cudaGetDevice(&device));
  for (const Entry& e : known)
    if (e.device == device && e.kernel == kernel) return e.blocks;
  int per_sm = 0, sms = 0;
  QWENRT_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kThreads, red_bytes));
  QWENRT_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  known.push_back({device, kernel, static_cast<int64_t>(per_sm) * sms});
  return known.back().blocks;
}

}  // namespace qwenrt::cuda::tile_blocks
