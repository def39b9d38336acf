#pragma once
// Device pieces shared by the attention kernels: where a cached position lives in the paged pools,
// and head rows in shared memory laid out so that
// ldmatrix reads them without bank conflicts.
#include <cuda_bf16.h>

#include <cstdint>

#include "backend/cuda/attention/paged_kv.h"
#include "backend/cuda/ptx/gate_math.cuh"
#include "backend/cuda/ptx/mma.cuh"

namespace qwenrt::cuda {

// Element offset of (position, kv head) in a K or V pool: the block table names the block, the
// position's remainder the row inside it.
__device__ __forceinline__ int64_t paged_offset(const PagedKv& kv, const int32_t* table, int pos, int kv_head) {
  const int page = pos / kv.block_size, row = pos - page * kv.block_size;
  const int64_t block = table[page];
  return ((block * kv.block_size + row) * kv.num_kv_heads + kv_head) * kAttentionHeadDim;
}

// A tile in shared memory holds whole head rows (256 bf16 = 512 bytes = 32 chunks of 16 bytes).
// ldmatrix reads one 16-byte chunk from each of 8 consecutive rows; with a plain 512-byte stride
// those all sit in the same four banks. XOR-ing the chunk index with the row's low three bits puts
// the 8 chunks in 8 different bank groups. Returns the byte offset of (row, chunk).
constexpr int kHeadRowBytes = kAttentionHeadDim * 2;
__device__ __forceinline__ uint32_t swizzled(int row, int chunk) { return static_cast<uint32_t>(row * kHeadRowBytes + ((chunk ^ (row & 7)) << 4)); }

// The calling warp copies one head row (512 bytes) into row `row` of a swizzled tile; lane i takes
// chunk i, so each copy instruction moves one contiguous row.
__device__ __forceinline__ void copy_head_row_async(uint32_t tile, int row, const __nv_bfloat16* src, bool fill, int lane) {
  cp_async16(tile + swizzled(row, lane), src + 8 * lane, fill);
}

}  // namespace qwenrt::cuda
