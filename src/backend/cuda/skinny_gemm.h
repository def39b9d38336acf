#pragma once
// Decode-shaped matrix products on the GPU: y = x · Wᵀ for a few activation rows (1..64) against
// large bf16 weights, f32 accumulation. Bandwidth-bound: each weight element is read once per call
// from device memory for the whole batch, streamed past L1.
//
// Results are batch-invariant and deterministic: an output element's dot product runs in the same
// order whatever else is in the batch (the K split depends on the weights' shapes alone, partial
// sums are reduced across warps and K ranges in a fixed order). Weights too small to fill the GPU
// with row tiles are split along K over several blocks, whose partial products go through a
// workspace and a second, small kernel.
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <span>

namespace qwenrt::cuda {

constexpr int64_t kSkinnyGemmMaxRows = 64;
constexpr int kSkinnyGemmMaxSegments = 4;

// One weight and where its products go: y[b * ldy + r] for activation row b, weight row r.
// With `accumulate` the product is added to what y holds (a fused residual add).
struct GemmSegment {
  const __nv_bfloat16* w = nullptr;  // [rows, k] row-major
  int64_t rows = 0;
  float* y = nullptr;
  int64_t ldy = 0;
  bool accumulate = false;
};

// Workspace bytes skinny_gemm needs for these shapes (0 when the weights fill the GPU alone).
std::size_t skinny_gemm_workspace_bytes(int64_t n, int64_t k, std::span<const GemmSegment> segments);

// x: [n, k] bf16 with row stride ldx (elements); 1 <= n <= 64; k and ldx multiples of 8 and both
// pointers 16-byte aligned. Up to four weights sharing k run in one launch. Error on bad shapes or
// a workspace smaller than skinny_gemm_workspace_bytes.
void skinny_gemm(const __nv_bfloat16* x, int64_t n, int64_t k, int64_t ldx, std::span<const GemmSegment> segments,
                 cudaStream_t stream, void* workspace = nullptr, std::size_t workspace_bytes = 0);

}  // namespace qwenrt::cuda
