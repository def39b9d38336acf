#pragma once
// The GPU KV cache of one full-attention layer, kept in pages (blocks) so sequences grow without
// moving: bf16 K and V pools of [num_blocks, block_size, num_kv_heads, head_dim], and per sequence
// a block table whose entry i names the pool block that holds positions [i·block_size, (i+1)·block_size).
// The attention kernels (attention_prepare/decode/prefill) all read and write it through this view.
#include <cuda_bf16.h>

#include <cstdint>

#include "core/error.h"

namespace qwenrt::cuda {

// The attention kernels are written for Qwen 3.5's head size: one head row is 512 bytes of bf16,
// sixteen 32-byte sectors, read whole by a warp.
constexpr int kAttentionHeadDim = 256;

struct PagedKv {
  __nv_bfloat16* k = nullptr;  // [num_blocks, block_size, num_kv_heads, head_dim]
  __nv_bfloat16* v = nullptr;  // same layout
  int64_t num_blocks = 0;
  int block_size = 0;  // positions per block (any value >= 1; 64 by default)
  int num_kv_heads = 0;
  int head_dim = 0;
  const int32_t* block_tables = nullptr;  // [sequences, max_blocks_per_seq], device memory
  int max_blocks_per_seq = 0;
};

// Error unless the view is usable by the kernels: pools and tables present and 16-byte aligned,
// head_dim 256, positive sizes. `who` names the caller in the message.
inline void check_paged_kv(const PagedKv& kv, const char* who) {
  if (!kv.k || !kv.v || !kv.block_tables) fail(who, ": KV pools and block tables must be device pointers, got null");
  if ((reinterpret_cast<uintptr_t>(kv.k) | reinterpret_cast<uintptr_t>(kv.v)) % 16 != 0) fail(who, ": KV pools are not 16-byte aligned");
  if (kv.head_dim != kAttentionHeadDim) fail(who, ": head_dim ", kv.head_dim, " (only ", kAttentionHeadDim, " is built)");
  if (kv.num_kv_heads < 1 || kv.block_size < 1 || kv.num_blocks < 1 || kv.max_blocks_per_seq < 1)
    fail(who, ": KV cache with ", kv.num_kv_heads, " kv heads, ", kv.num_blocks, " blocks of ", kv.block_size, " positions, ", kv.max_blocks_per_seq,
         " blocks per sequence (all must be >= 1)");
}

}  // namespace qwenrt::cuda
