#pragma once
// One decode step of a Gated DeltaNet layer on the GPU, after the input projections and before the
// output projection: one new row per sequence, B sequences, one fused kernel. For each row:
//   conv:  causal depthwise conv over the K−1 cached pre-conv rows and the new one, then SiLU;
//   q, k:  L2-normalised per key head (q also scaled by dk^-1/2);
//   gates: β = sigmoid(b), g = neg_exp_a·softplus(a + dt_bias) (PyTorch softplus, linear above 20);
//   state: S ← exp(g)·S; δ = β(v − Sᵀk); S ← S + kδᵀ; o = Sᵀq, per value head, in f32;
//   out:   rmsnorm(o)·norm_w ⊙ silu(z) per value head, rounded to bf16 for the output projection.
// The same arithmetic as the CPU layer (model/deltanet.cpp) in its decode phase.
//
// The conv cache of a slot is a ring of K pre-conv rows: position p lives in ring row p mod K.
// A row at position p reads the rows of positions p−K+1..p−1 (negative positions read as zeros,
// whatever the ring holds) and writes its own row over ring row p mod K, which held position p−K
// and is needed by nobody: so the kernel never reads what it writes in the same launch.
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace qwenrt::cuda {

// The shapes the kernel is built for (every released Qwen 3.5 model): dk = dv = 128, K = 4.
constexpr int kDeltaNetDecodeHeadDim = 128;
constexpr int kDeltaNetDecodeConvKernel = 4;

struct DeltaNetDecodeArgs {
  // Projections of the new rows (f32). qkv [B, conv_dim] pre-conv: q (nk·dk) | k (nk·dk) | v (nv·dv).
  const float* qkv = nullptr;
  int64_t ld_qkv = 0;
  const float* z = nullptr;  // [B, nv·dv] gate of the output norm
  int64_t ld_z = 0;
  const float* b = nullptr;  // [B, nv] raw, before the sigmoid
  const float* a = nullptr;  // [B, nv] raw, before the softplus
  int64_t ld_ba = 0;         // row stride of both b and a

  // Layer weights, f32.
  const float* conv_w = nullptr;     // [conv_dim, K]
  const float* neg_exp_a = nullptr;  // [nv] = −exp(A_log)
  const float* dt_bias = nullptr;    // [nv]
  const float* norm_w = nullptr;     // [dv], used as is
  float eps = 1e-6f;                 // of the gated RMSNorm

  // Per-slot caches, updated in place. conv: a ring of K rows × conv_dim (see above). rec: [nv, dk, dv]
  // with S[i][j] at i·dv + j; moved in 16-byte pieces, so rec_state is 16-byte aligned and
  // rec_slot_stride a multiple of 4.
  float* conv_state = nullptr;
  int64_t conv_slot_stride = 0;  // elements between slots
  float* rec_state = nullptr;
  int64_t rec_slot_stride = 0;  // elements between slots

  // Device arrays over the step's rows: each row's cache slot and position (tokens before it in its
  // sequence, >= 0). The slots of one launch's rows are distinct.
  const int32_t* slots = nullptr;
  const int64_t* positions = nullptr;
  // Committed steps (several rows of a sequence, each computed as a lone decode row would be): one
  // launch per row index j, launch j taking the step rows rows[0 .. B) (row j of each sequence that
  // has one). Its state and conv ring are the previous launch's output, so it reads them after the
  // wait on the kernel ahead. Null: launch row b is step row b (decode steps).
  const int32_t* rows = nullptr;
  // Speculation (ModelCache::keep_row_states): per step row, the address of a slot-sized state
  // buffer (0 for none) where the layer's conv ring and recurrent state after the row are copied,
  // at keep_conv_offset and keep_rec_offset floats (the layer's place in a slot's range). Null:
  // nothing kept.
  const unsigned long long* keep = nullptr;
  int64_t keep_conv_offset = 0, keep_rec_offset = 0;

  __nv_bfloat16* out = nullptr;  // [step rows, nv·dv]
  int64_t ld_out = 0;

  int B = 0, nk = 0, nv = 0, dk = 0, dv = 0, K = 0;
};

// Checks the shapes on the host (Error naming what is unsupported) and launches on `stream`.
void deltanet_decode(const DeltaNetDecodeArgs& args, cudaStream_t stream);

}  // namespace qwenrt::cuda
