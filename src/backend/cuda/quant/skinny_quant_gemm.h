#pragma once
// Decode-shaped products y = x · Wᵀ over quantized weights (quant_matrix.h) for 1..64 activation
// rows: each weight row is streamed once per launch for up to 32 rows (the tiled and FP8 kernels;
// 8 for weights in rows) and decoded in registers, f32 sums;
// several weights sharing k in one launch (segments), each output written or added to (a fused
// residual add).
//   MLX affine in tensor-core tiles (QuantMatrix::tiled, the uploader's layout for 4-bit and 8-bit
//   containers): on the tensor cores, per group the exact sums Σ q·x and Σ x (q an exact bf16; an
//   8-bit q as two nibbles), folded as s · Σ q·x + b · Σ x in f32 (skinny_quant_affine_tiles.cu).
//   MLX affine in rows (where not tiled: columns not a multiple of 64): a warp per weight row, each
//   field dequantized with one rounding as the CPU does (skinny_quant_affine.cu).
//   Block FP8: on the tensor cores, 16-row tiles with the K split among 8 warps, each e4m3 byte made
//   its exact bf16 value and each tile column's sums scaled once (skinny_quant_fp8.cu).
// No weight is rounded.
//
// Batch-invariant and deterministic: a batch row's sums never see another row's activations, and
// every sum is taken in a fixed order, so a row's result is the same bit for bit alone or among 64.
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <span>

#include "backend/cuda/quant/quant_matrix.h"

namespace qwenrt::cuda {

constexpr int64_t kSkinnyQuantMaxRows = 64;
constexpr int64_t kSkinnyQuantLaunchRows = 32;     // rows a tiled or FP8 launch takes (four n-tiles)
constexpr int64_t kSkinnyQuantRowsKernelRows = 8;  // rows a launch over weights in rows takes
constexpr int kSkinnyQuantMaxSegments = 4;

// One quantized weight and where its products go: y[b · ldy + r] (+)= x_b · W[r].
struct QuantSegment {
  QuantMatrix w;
  float* y = nullptr;
  int64_t ldy = 0;
  bool accumulate = false;
};

// x: [n, k] bf16 with row stride ldx; 1 <= n <= 64; k and ldx multiples of 8, x 16-byte aligned;
// every weight has cols == k. Error on bad shapes.
void skinny_quant_gemm(const __nv_bfloat16* x, int64_t n, int64_t k, int64_t ldx, std::span<const QuantSegment> segments, cudaStream_t stream);

}  // namespace qwenrt::cuda
