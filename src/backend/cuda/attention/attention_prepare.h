#pragma once
// The per-row step of gated full attention between the projections and the attention kernels:
// RMSNorm of each query and key head, rotate-half RoPE on their first rotary_dim dims, the query
// stored as bf16 for the tensor cores, and the row's K and V written into the paged cache at its
// position. The gate stays where the projection put it (the second half of each query head in qg);
// attention_decode and attention_prefill read it there and apply sigmoid(gate) to their output.
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "backend/cuda/attention/paged_kv.h"

namespace qwenrt::cuda {

// Rows of any mix of sequences (decode rows, prompt windows): row r sits at positions[r] of the
// sequence whose block table is row seq[r] of PagedKv::block_tables. Device arrays of `count`.
struct AttentionRows {
  const int32_t* positions = nullptr;
  const int32_t* seq = nullptr;
  int64_t count = 0;
};

// The q/k normalisation and rotary embedding of one layer. The norm weights (device, f32, [256])
// already hold (1 + w); inverse frequencies are 1/theta^(2d/rotary_dim) as rope_angles computes them.
struct QkNormRope {
  const float* q_norm = nullptr;
  const float* k_norm = nullptr;
  float eps = 1e-6f;
  int rotary_dim = 64;  // a multiple of 16, at most 256
  double theta = 1e7;
};

// qg: [rows, num_q_heads, 2, 256] f32 (per head 256 query values, then 256 gate values);
// k, v: [rows, num_kv_heads, 256] f32. Writes q_out [rows, num_q_heads, 256] bf16 and K/V of every
// row into kv. All f32 inputs 16-byte aligned. A position outside the sequence's block table, or a
// table entry outside the pool, traps the kernel rather than writing past the cache.
void attention_prepare(const AttentionRows& rows, const float* qg, const float* k, const float* v, int num_q_heads, const QkNormRope& norm,
                       const PagedKv& kv, __nv_bfloat16* q_out, cudaStream_t stream);

}  // namespace qwenrt::cuda
