#pragma once
// Cache-blocked, register-tiled products for prompt windows (many x rows), one per weight format
// that has one. Each computes rows [r0, r1) of y = x · Wᵀ exactly like the row kernels of
// matmul_formats.h, bit for bit per (x row, weight row): the same 8 interleaved partial sums in
// the same order (MLX affine: over its positions, mlx_affine_positions.h), the same final
// reduction and tail. Only which rows, outputs and k range are in cache and registers at a time
// differs: a panel of weight rows is converted (dense) or dequantized (MLX affine, FP8) to f32 once
// per k-block and reused by every x row of a row block, with the partial sums parked in a small
// buffer between k-blocks.
#include <cstdint>

#include "backend/cpu/matmul_formats.h"

namespace qwenrt::cpu {

// Windows of at least this many x rows go through the blocked kernels (fewer rows reuse a
// converted weight panel too little to pay for converting it).
constexpr int64_t kBlockedMinRows = 8;

// The blocked kernel of w's format, or nullptr when its format has none (the row kernel then
// serves every batch size).
RowKernel blocked_kernel(const Weight& w);

// The entry points, AVX2 where the machine has it else the scalar twin, and the scalar twins
// themselves (same bits; for the tests).
void dense_rows_blocked(const float* x, int64_t n, int64_t k, const Weight& w, float* y, int64_t ldy, int64_t r0, int64_t r1);
void dense_rows_blocked_scalar(const float* x, int64_t n, int64_t k, const Weight& w, float* y, int64_t ldy, int64_t r0, int64_t r1);
void mlx_affine_rows_blocked(const float* x, int64_t n, int64_t k, const Weight& w, float* y, int64_t ldy, int64_t r0, int64_t r1);
void mlx_affine_rows_blocked_scalar(const float* x, int64_t n, int64_t k, const Weight& w, float* y, int64_t ldy, int64_t r0, int64_t r1);
void fp8_block_rows_blocked(const float* x, int64_t n, int64_t k, const Weight& w, float* y, int64_t ldy, int64_t r0, int64_t r1);
void fp8_block_rows_blocked_scalar(const float* x, int64_t n, int64_t k, const Weight& w, float* y, int64_t ldy, int64_t r0, int64_t r1);
// MLX affine over activations prepared once for w's layout (as mlx_affine_rows takes them).
void mlx_affine_rows_blocked(const mlx_affine::Activations& a, const Weight& w, float* y, int64_t ldy, int64_t r0, int64_t r1);

}  // namespace qwenrt::cpu
