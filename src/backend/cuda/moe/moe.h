#pragma once
// The sparse mixture-of-experts FFN on the GPU (Qwen 3.5 MoE): routing, the experts' gated FFNs and
// the weighted sum, for decode rows and prompt windows.
//
//   route        softmax over the router's logits, top-k (ties to the lower index), renormalised;
//                with a shared expert, slot k of each row is that expert with weight sigmoid(gate)
//   decode rows  (<= kMoeDecodeRows) one weight-streaming launch for the selected experts' gate/up
//                and SwiGLU, one for their down products and the weighted sum: only the selected
//                experts' weights are read, and a row's result does not depend on the other rows
//   windows      the (row, slot) pairs grouped by expert on the device (each expert's run padded to
//                the GEMM tile: 64 rows, 32 when the experts get few rows each), grouped tensor-core GEMMs over all experts in one launch each
//                (gate/up with SwiGLU in the epilogue, then down), and a gather that adds each row's
//                slots in slot order: no host round trip, no per-expert loop on the host
//   packed       quantized experts (MoeExperts::packed) stay packed: decode rows dequantize the
//                selected experts' pieces in registers (moe_decode_packed.cu; batches of 9 to 64
//                rows grouped by expert first, moe_decode_grouped.cu); windows dequantize the
//                layer's stacks into a bf16 scratch (moe_dequantize) for the grouped GEMMs
//
// Every launch is graph-capturable (no host synchronisation).
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "backend/cuda/quant/quant_matrix.h"

namespace qwenrt::cuda {

constexpr int kMoeMaxExperts = 512;                       // routed experts (Qwen 3.5: 256 or 512)
constexpr int kMoeMaxExpertsPerToken = 16;                // routed top-k
constexpr int kMoeMaxSlots = kMoeMaxExpertsPerToken + 1;  // + the shared expert
constexpr int64_t kMoeDecodeRows = 8;
// Rows of the router product on the device: the E routers' rows, the shared expert's gate row, then
// zero rows to a multiple of 8, so its logits are an N and a row stride cuBLAS's fast kernels take
// (35B-A3B's 257 rows ran at ~50 TFLOP/s in prompt windows).
constexpr int64_t moe_router_rows(int64_t experts, bool shared) { return (experts + (shared ? 1 : 0) + 7) / 8 * 8; }

// The experts as the kernels read them, stacked: expert e's gate rows then its up rows at
// gate_up + e·2·I·H, its down matrix [H, I] at down + e·H·I. With a shared expert it is expert
// `experts` (zero-padded to I when its own FFN size is smaller: silu(0)·0 adds nothing).
struct MoeExperts {
  const __nv_bfloat16* gate_up = nullptr;  // [experts (+1), 2I, H]
  const __nv_bfloat16* down = nullptr;     // [experts (+1), H, I]
  int experts = 0;                         // routed experts E
  int top_k = 0;
  bool shared = false;
  int64_t hidden = 0;  // H, a multiple of 8
  int64_t inter = 0;   // I, a multiple of 8
  int slots = 0;       // per row: top_k, and the shared expert's
  // Packed instead (gate_up / down unused): the same stacks as quantized matrices, rows
  // [(experts (+1))·2I, H] and [(experts (+1))·H, I], one format for all.
  bool packed = false;
  QuantMatrix gate_up_packed, down_packed;
};

// Packed experts widened to bf16 stacks in `scratch` (moe_dequantized_bytes, 16-byte aligned): the
// MoeExperts the grouped kernels read (each value rounded to bf16 once).
std::size_t moe_dequantized_bytes(const MoeExperts& packed);
MoeExperts moe_dequantize(const MoeExperts& packed, void* scratch, cudaStream_t stream);

// Routing of `rows` rows: logits f32 [rows, ld] (the E router columns, then the shared expert's gate
// logit at column E when experts.shared). ids / weights: [rows, slots] (expert index, weight).
void moe_route(const float* logits, int64_t ld, int64_t rows, const MoeExperts& experts, int32_t* ids, float* weights, cudaStream_t stream);

// Decode rows: x bf16 [rows, H] (row stride ldx); y[r * ldy + d] (+= with accumulate) the MoE output.
// Bf16 or packed experts.
// act: scratch of moe_decode_act_bytes(rows). rows <= kMoeDecodeRows.
std::size_t moe_decode_act_bytes(int64_t rows, const MoeExperts& experts);
void moe_decode(const __nv_bfloat16* x, int64_t ldx, int64_t rows, const MoeExperts& experts, const int32_t* ids, const float* weights,
                __nv_bfloat16* act, float* y, int64_t ldy, bool accumulate, cudaStream_t stream);

// Packed experts in batches of more than kMoeDecodeRows rows (any count): the (row, slot) pairs
// grouped by expert first, so each chosen expert's packed rows are read once for up to four of its
// pairs (moe_decode_grouped.cu); every row the same bits as moe_decode gives it. Scratch of
// moe_decode_grouped_scratch_bytes(rows) (16-byte aligned).
std::size_t moe_decode_grouped_scratch_bytes(int64_t rows, const MoeExperts& experts);
void moe_decode_grouped(const __nv_bfloat16* x, int64_t ldx, int64_t rows, const MoeExperts& experts, const int32_t* ids, const float* weights,
                        void* scratch, float* y, int64_t ldy, bool accumulate, cudaStream_t stream);

// Windows: the same with the grouped GEMMs (bf16 experts: moe_dequantize packed ones first); scratch of moe_window_scratch_bytes(rows) (16-byte
// aligned). Any number of rows.
std::size_t moe_window_scratch_bytes(int64_t rows, const MoeExperts& experts);
void moe_window(const __nv_bfloat16* x, int64_t ldx, int64_t rows, const MoeExperts& experts, const int32_t* ids, const float* weights, void* scratch,
                float* y, int64_t ldy, bool accumulate, cudaStream_t stream);

}  // namespace qwenrt::cuda
