#pragma once
// The kernels behind skinny_quant_gemm (skinny_quant_gemm.cu splits a launch's weights into runs of
// one format): MLX affine weights in rows a warp per row (skinny_quant_affine.cu), affine weights in
// tensor-core tiles on the tensor cores (skinny_quant_affine_tiles.cu), block FP8 weights on the
// tensor cores (skinny_quant_fp8.cu). Weights already checked; 1 <= n <= 8 for the rows kernel,
// 1 <= n <= 32 for the others; up to
// kSkinnyQuantMaxSegments weights a call.
#include "backend/cuda/quant/skinny_quant_gemm.h"

namespace qwenrt::cuda {

void skinny_quant_affine(const __nv_bfloat16* x, int64_t n, int64_t ldx, std::span<const QuantSegment> segments, cudaStream_t stream);

// Tiled affine weights of one container width, group size and scale type.
void skinny_quant_affine_tiles(const __nv_bfloat16* x, int64_t n, int64_t ldx, std::span<const QuantSegment> segments, cudaStream_t stream);

// FP8 weights of one piece size (skinny_fp8_piece_bytes).
int skinny_fp8_piece_bytes(const QuantMatrix& m);
void skinny_quant_fp8(const __nv_bfloat16* x, int64_t n, int64_t ldx, std::span<const QuantSegment> segments, cudaStream_t stream);

}  // namespace qwenrt::cuda
