#pragma once
// Decode-shaped products y = x · Wᵀ over quantized weights (quant_matrix.h) for 1..8 activation
// rows, on the tensor cores: each weight row is streamed once per call for all rows, its fields
// turned into exact bf16 values in registers (a few integer operations per pair, no conversions)
// and multiplied against the activations by m16n8k16 products with f32 sums; each affine group's
// (FP8 tile's) sums are then scaled once: y += s · Σ q·x + b · Σ x (the activations' sums come from
// the same products against ones). No weight is ever rounded: the result differs from the exact
// f32 product only by the order of the f32 sums. The structure of the bf16 skinny_gemm: 16-row
// tiles, the K range split among a block's warps, the next pieces' loads in flight while the
// current ones are multiplied; several weights sharing k in one launch (segments), each output
// written or added to (a fused residual add).
//
// Batch-invariant and deterministic: a batch row's sums never see another row's activations, and
// every sum is taken in a fixed order, so a row's result is the same bit for bit alone or among 8.
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <span>

#include "backend/cuda/quant/quant_matrix.h"

namespace qwenrt::cuda {

constexpr int64_t kSkinnyQuantMaxRows = 8;
constexpr int kSkinnyQuantMaxSegments = 4;

// One quantized weight and where its products go: y[b · ldy + r] (+)= x_b · W[r].
struct QuantSegment {
  QuantMatrix w;
  float* y = nullptr;
  int64_t ldy = 0;
  bool accumulate = false;
};

// x: [n, k] bf16 with row stride ldx; 1 <= n <= 8; k and ldx multiples of 8, x 16-byte aligned;
// every weight has cols == k. Error on bad shapes.
void skinny_quant_gemm(const __nv_bfloat16* x, int64_t n, int64_t k, int64_t ldx, std::span<const QuantSegment> segments, cudaStream_t stream);

}  // namespace qwenrt::cuda
