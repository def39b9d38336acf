#pragma once
// Decode-shaped matrix products on the GPU: y = x · Wᵀ for a few activation rows (1..64) against
// large bf16 weights, f32 accumulation. Bandwidth-bound: each weight element is read once per call
// from device memory for the whole batch, each warp keeping several 16-byte loads per lane in flight
// and feeding them straight to tensor-core products. The FFN's gate and up products can end in the
// SwiGLU activation in the same launch.
//
// Results are batch-invariant and deterministic: an output element's dot product runs in the same
// order whatever else is in the batch (the K split depends on the weights' shapes alone, partial
// sums are reduced across warps and K ranges in a fixed order). Weights too small to fill the GPU
// with row tiles are split along K over several blocks; the last block of a row tile to finish
// adds the ranges' partial sums (kept in the workspace) in range order.
//
// The weights are read before the kernel waits for the kernels ahead of it on the stream (chained
// launch): nothing may write them in the kernel launched just before.
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <span>

#include "backend/cuda/ptx/non_finite_probe.h"

namespace qwenrt::cuda {

constexpr int64_t kSkinnyGemmMaxRows = 64;
constexpr int kSkinnyGemmMaxSegments = 4;
// Row tiles of a launch that splits K count their finished ranges here (never more tiles than this).
constexpr int kSkinnyGemmCounters = 384;

// Activations computed by the launch itself: x[b, i] = bf16(h[b, i] · rsqrt(mean(h[b, :k]²) + eps) ·
// w[i]), RMSNorm of f32 rows with the weight (1 + w already folded in) and the rounding of
// cuda::rms_norm_rows (the sum of squares runs in another order). For decode rows, this removes the
// norm's own launch. h: 16-byte aligned, row stride ldh a multiple of 4; w: [k] f32.
struct SkinnyNormedRows {
  const float* h = nullptr;
  int64_t ldh = 0;
  const float* w = nullptr;
  float eps = 0;
  NonFiniteProbe probe;  // where a row whose sum of squares is not finite is reported
  // Optional: the normalised rows also stored here (bf16, row stride ld_out) by the launch's first
  // row tile, for what reads them next (the MoE experts after the router product).
  __nv_bfloat16* out = nullptr;
  int64_t ld_out = 0;
};
constexpr int64_t kSkinnyGemmMaxNormedRows = 8;
constexpr int64_t kSkinnyGemmMaxNormedK = 10240;  // the rows' bf16 copy lives in shared memory

// One weight and where its products go: y[b * ldy + r] for activation row b, weight row r.
// With `accumulate` the product is added to what y holds (a fused residual add).
struct GemmSegment {
  const __nv_bfloat16* w = nullptr;  // [rows, k] row-major
  int64_t rows = 0;
  float* y = nullptr;
  int64_t ldy = 0;
  bool accumulate = false;
};

// Scratch of the K-split launches. `counters`: kSkinnyGemmCounters uint32 zeros, zeroed once by the
// owner; every call leaves them zero. One workspace serves one stream at a time.
struct SkinnyGemmWorkspace {
  void* partial = nullptr;
  std::size_t partial_bytes = 0;
  uint32_t* counters = nullptr;
};

// Partial-sum bytes skinny_gemm needs for these shapes (0 when the weights fill the GPU alone).
// Shared memory per block the normalised launches may ask for (their rows' bf16 copy, at most
// kSkinnyGemmMaxNormedRows x kSkinnyGemmMaxNormedK).
constexpr std::size_t kSkinnyGemmMaxSharedBytes = 2 * kSkinnyGemmMaxNormedRows * kSkinnyGemmMaxNormedK;
std::size_t skinny_gemm_workspace_bytes(int64_t n, int64_t k, std::span<const GemmSegment> segments);

// x: [n, k] bf16 with row stride ldx (elements); 1 <= n <= 64; k and ldx multiples of 8 and both
// pointers 16-byte aligned. Up to four weights sharing k run in one launch. Error on bad shapes or
// a workspace smaller than its shapes need.
void skinny_gemm(const __nv_bfloat16* x, int64_t n, int64_t k, int64_t ldx, std::span<const GemmSegment> segments, cudaStream_t stream,
                 const SkinnyGemmWorkspace& workspace = {});

// The same with normalised activations (at most kSkinnyGemmMaxNormedRows rows, k at most
// kSkinnyGemmMaxNormedK); no output may overlap h.
void skinny_gemm(const SkinnyNormedRows& x, int64_t n, int64_t k, std::span<const GemmSegment> segments, cudaStream_t stream,
                 const SkinnyGemmWorkspace& workspace = {});

// The gated FFN activation in one launch: act[b * ld_act + r] = bf16(silu(g) · u) with
// g = x_b · gate_r and u = x_b · up_r, for r < rows (gate and up both [rows, k]). The same
// rounding as cuda::swiglu_rows over f32 products.
std::size_t skinny_gemm_swiglu_workspace_bytes(int64_t n, int64_t k, int64_t rows);
void skinny_gemm_swiglu(const __nv_bfloat16* x, int64_t n, int64_t k, int64_t ldx, const __nv_bfloat16* gate, const __nv_bfloat16* up, int64_t rows,
                        __nv_bfloat16* act, int64_t ld_act, cudaStream_t stream, const SkinnyGemmWorkspace& workspace = {});

void skinny_gemm_swiglu(const SkinnyNormedRows& x, int64_t n, int64_t k, const __nv_bfloat16* gate, const __nv_bfloat16* up, int64_t rows,
                        __nv_bfloat16* act, int64_t ld_act, cudaStream_t stream, const SkinnyGemmWorkspace& workspace = {});

}  // namespace qwenrt::cuda
