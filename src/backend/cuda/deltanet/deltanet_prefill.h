#pragma once
// A window of rows through a Gated DeltaNet layer on the GPU (prefill, or any window phase), after
// the input projections and before the output projection: the same arithmetic as the decode kernel
// (deltanet_decode.h) row after row, computed in chunks of 64 rows on tensor cores.
//
// Within a chunk, with G_t the cumulative log decay from the chunk start, γ_t = exp(G_t), S₀ the
// state at the chunk start and δ_t the delta-rule updates, the recurrence unrolls to
//   (I + L) Δ = diag(β)V − diag(βγ)K S₀,   L_ts = β_t (k_t·k_s) e^{G_t−G_s} for s < t, else 0,
// so with T = (I + L)⁻¹, W = T diag(βγ)K and U = T diag(β)V (the WY/UT form):
//   Δ   = U − W S₀
//   O   = diag(γ) Q S₀ + ((Q Kᵀ) ⊙ e^{G_t−G_s}, s ≤ t) Δ
//   S_C = γ_C S₀ + (diag(e^{G_C−G_t}) K)ᵀ Δ.
// Three kernels: `prepare` (conv, norms, gates, T, W, U; all chunks in parallel), `state` (S
// carried chunk to chunk, Δ; heads and column slices in parallel; S₀ snapshots out) and `output`
// (Δ again from U, W and the snapshot, then O and the gated norm; all chunks in parallel). Products run on tensor cores in bf16 with f32
// accumulation. Most operands (T, X = diag(βγ)K, W, the state snapshots S₀) are rounded to bf16 once by whoever writes them: their errors the delta
// rule corrects, or they stay below the output's own bf16 rounding. Where one rounding would not be (each costs ~1.5e-3 relative or more), the f32
// value x is split as hi = bf16(x), lo = bf16(x − hi) (~16 bits) and the product runs as hi·hi + lo·hi + hi·lo:
//   state:  Kᵀ Δw (k and the weighted Δ both split) and U = T (Y_hi + Y_lo), Y = diag(β) V;
//   output: Q Kᵀ (both split), (Q_hi + Q_lo) S₀ and P Δ (P and Δ both split), where the gated
//           norm scales a small O up and with it the error of q, k and Δ.
// U, the gates and the triangular solve stay f32, and the state itself stays f32 from chunk to
// chunk (only the copy that feeds a product is rounded).
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "backend/cuda/deltanet/deltanet_decode.h"

namespace qwenrt::cuda {

constexpr int kDeltaNetChunk = 64;

// One sequence's rows in the window: rows first_row.. first_row+rows−1 of the inputs are its
// positions start_position.., and its conv ring and state live in cache slot `slot`.
struct DeltaNetSpan {
  int32_t first_row = 0, rows = 0, start_position = 0, slot = 0;
};

// Bytes of device workspace a window of these spans needs (metadata and per-chunk intermediates).
std::size_t deltanet_prefill_workspace_bytes(const std::vector<DeltaNetSpan>& spans, int nk, int nv);
// Shared memory per block the window's kernels ask for with nv value heads.
std::size_t deltanet_prefill_shared_bytes(int nv);

// A window laid out in a workspace, its metadata uploaded: made once per step, then used by every
// DeltaNet layer of the step (they share the workspace, one layer after another on the stream).
struct DeltaNetWindow {
  std::vector<DeltaNetSpan> spans;
  void* workspace = nullptr;
  int nk = 0, nv = 0, chunks = 0;
};

// Checks the spans (rows >= 1, positions >= 0, distinct slots) and the workspace size; Error
// naming what is wrong.
DeltaNetWindow plan_deltanet_window(const std::vector<DeltaNetSpan>& spans, int nk, int nv, void* workspace, std::size_t workspace_bytes,
                                    cudaStream_t stream);

// Runs one layer over the window. `args` is read as for deltanet_decode except `slots`,
// `positions` and `B`, which the window replaces. Checks the shapes on the host (Error naming what
// is unsupported) and launches on `stream`.
void deltanet_prefill(const DeltaNetDecodeArgs& args, const DeltaNetWindow& window, cudaStream_t stream);

}  // namespace qwenrt::cuda
