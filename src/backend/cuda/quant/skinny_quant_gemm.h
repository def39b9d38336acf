#pragma once
// Decode-shaped products y = x · Wᵀ over quantized weights (quant_matrix.h) for 1..8 activation
// rows: each weight row is streamed once per call for all rows (16 bytes per lane per load) and
// dequantized in registers (quant_decode.cuh), f32 accumulation. The structure of the bf16
// skinny_gemm: several weights sharing k in one launch (segments), each output written or added to
// (a fused residual add).
//
// Batch-invariant and deterministic: one warp owns one weight row; lane l takes the row's 16-byte
// pieces l, l + 32, ... in order, accumulating activation row b's products in four f32 sums
// (element j of each 8 into sum j mod 4) with explicit fma, the sums added in a fixed order and
// then across the warp by a fixed butterfly. Nothing in that order depends on the other rows, so a
// row's result is the same bit for bit alone or among 8.
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
