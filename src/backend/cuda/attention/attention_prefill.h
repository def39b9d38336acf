#pragma once
// Causal attention for prompt windows: several consecutive rows of each sequence, whose keys
// attention_prepare has already written into the paged cache. Each row attends to cached positions
// [0, its position]; earlier windows' keys are read from the cache like the window's own.
//
// Flash-attention style on bf16 tensor cores with an f32 online softmax: Hopper's warpgroup products
// (wgmma) where the build and the GPU have them, else mma.sync m16n8k16 (sm_80+). GQA:
// a block serves all the query heads of one kv head, packing (row, head) pairs as the rows of its
// query tile, so each K/V tile is read once for the whole group.
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "backend/cuda/attention/paged_kv.h"

namespace qwenrt::cuda {

// Sequence s (block table row s) has rows [first_row[s], first_row[s+1]) of the batch (device
// array of num_seqs + 1, non-decreasing; a window may be empty); their positions (device, one per
// row) are consecutive and ascending within a window.
struct PrefillWindows {
  const int32_t* first_row = nullptr;
  const int32_t* positions = nullptr;
  int num_seqs = 0;
  int64_t rows = 0;  // first_row[num_seqs]: the batch's rows
};

// q: [rows, num_q_heads, 256] bf16 from attention_prepare; qg: the projection [rows, num_q_heads,
// 2, 256] f32 whose second half per head is the gate; out: [rows, num_q_heads·256] bf16 =
// softmax(q·Kᵀ/16 over positions <= the row's)·V · sigmoid(gate).
// `kernel` picks the implementation (tests and benchmarks compare them); Best is the fastest this
// GPU runs. Every choice gives the same sums within bf16 rounding of P.
enum class PrefillKernel { Best, Mma, Wgmma };
bool attention_prefill_supports(PrefillKernel kernel);
// Shared memory per block that the Best kernel asks for on the current GPU.
std::size_t attention_prefill_shared_bytes();
const char* prefill_kernel_name(PrefillKernel kernel);
void attention_prefill(const __nv_bfloat16* q, const float* qg, const PrefillWindows& windows, int num_q_heads, const PagedKv& kv, __nv_bfloat16* out,
                       cudaStream_t stream, PrefillKernel kernel = PrefillKernel::Best);

}  // namespace qwenrt::cuda
