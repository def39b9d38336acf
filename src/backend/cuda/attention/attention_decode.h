#pragma once
// Attention for decode: one query row per sequence against its whole paged KV cache, split along
// the keys (flash-decoding) so a single long sequence still spreads over every multiprocessor.
//
// Each (sequence, kv head, split) block reads its keys once for all the query heads that share the
// kv head (GQA) and keeps an f32 online softmax; a second, small kernel merges the splits in a fixed
// order and applies sigmoid(gate). Split boundaries depend on the sequence length alone, so a
// sequence's output is bitwise the same whatever else is in the batch.
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "backend/cuda/attention/paged_kv.h"

namespace qwenrt::cuda {

constexpr int kDecodeMaxGroup = 8;        // query heads per kv head (one n8 tensor-core tile)
constexpr int64_t kDecodeMaxSplits = 64;  // enough blocks for B = 1 to cover the GPU at long contexts
constexpr int64_t kDecodeMinSplitKeys = 128;
constexpr int64_t kDecodeSplitAlign = 32;  // a split is whole 32-key tiles (the last one may be partial)

// Keys per split for a sequence of `len` cached positions: at most 64 splits, at least 128 keys each.
constexpr int64_t decode_split_keys(int64_t len) {
  const int64_t even = (len + kDecodeMaxSplits - 1) / kDecodeMaxSplits;
  const int64_t aligned = (even + kDecodeSplitAlign - 1) / kDecodeSplitAlign * kDecodeSplitAlign;
  return aligned > kDecodeMinSplitKeys ? aligned : kDecodeMinSplitKeys;
}
constexpr int64_t decode_splits(int64_t len) { return (len + decode_split_keys(len) - 1) / decode_split_keys(len); }
// An upper bound of decode_splits(len) over 1 <= len <= max_len (the workspace's split stride).
constexpr int64_t decode_max_splits(int64_t max_len) {
  const int64_t by_min = (max_len + kDecodeMinSplitKeys - 1) / kDecodeMinSplitKeys;
  return by_min < kDecodeMaxSplits ? by_min : kDecodeMaxSplits;
}

// Bytes of scratch attention_decode needs for `batch` rows of `num_q_heads` heads whose lengths are
// at most max_seq_len: each split's normalised partial output and log-sum-exp, in f32.
std::size_t attention_decode_workspace_bytes(int64_t batch, int num_q_heads, int64_t max_seq_len);
// Shared memory per block of the split kernel.
std::size_t attention_decode_shared_bytes();

// Row b (0 <= b < batch) is the query of sequence b (block table row b) at positions[b]; it attends
// to cached positions [0, positions[b]], so positions[b] + 1 <= max_seq_len is required (device
// data, not checked). q: [batch, num_q_heads, 256] bf16 from attention_prepare; qg: the projection
// [batch, num_q_heads, 2, 256] f32 whose second half per head is the gate; out: [batch,
// num_q_heads·256] bf16 = softmax(q·Kᵀ/16)·V · sigmoid(gate). num_q_heads / num_kv_heads <= 8.
// committed: rows of one sequence share the launch (a committed step, each row at its own
// position): the keys of the rows before a row are new in this step too, so no key is read before
// the wait on attention_prepare (decode rows read the older keys early).
void attention_decode(const __nv_bfloat16* q, const float* qg, const int32_t* positions, int64_t batch, int num_q_heads, int64_t max_seq_len,
                      const PagedKv& kv, void* workspace, std::size_t workspace_bytes, __nv_bfloat16* out, cudaStream_t stream,
                      bool committed = false);

}  // namespace qwenrt::cuda
