#pragma once
// The shared-memory tile layout and operand descriptors of Hopper's warpgroup products (wgmma.cuh):
// plain address arithmetic, apart from the instructions so that the CPU emulator of the kernels
// (tools/cuda_emu) lays tiles out with the same code.
#include <cstdint>

namespace qwenrt::cuda {

// A tile of `rows` rows of bf16, 64·b elements per row, in the 128-byte-swizzle layout of wgmma: b
// column blocks of 64 elements ([rows x 128 B] each, one after the other); row r of a block at
// r*128 with its 16-byte chunk c stored at chunk c ^ (r % 8). The tile must start at a 1024-byte
// boundary (the hardware applies the swizzle to address bits, 1024 bytes = 8 rows being its
// period). Returns the byte offset of (row, chunk), chunk = element / 8 along the row.
__device__ __forceinline__ uint32_t wgmma_tile_offset(int rows, int row, int chunk) {
  return static_cast<uint32_t>((chunk >> 3) * rows * 128 + row * 128 + (((chunk & 7) ^ (row & 7)) << 4));
}

// Descriptor of a 128-byte-swizzled operand at shared address `addr`: `stride_bytes` between
// 8-row groups along the swizzled rows (1024 here), `lead_bytes` between column blocks where an
// instruction spans more than one (N-major B wider than 64), else unused.
__device__ __forceinline__ uint64_t wgmma_desc(uint32_t addr, uint32_t lead_bytes, uint32_t stride_bytes) {
  return static_cast<uint64_t>((addr & 0x3FFFF) >> 4) | static_cast<uint64_t>((lead_bytes >> 4) & 0x3FFF) << 16 |
         static_cast<uint64_t>((stride_bytes >> 4) & 0x3FFF) << 32 | uint64_t{1} << 62;
}

}  // namespace qwenrt::cuda
