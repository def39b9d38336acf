#pragma once
// The per-format row kernels behind cpu::matmul_multi: one file per weight format
// (matmul_dense.cpp: f32, f16, bf16; matmul_mlx_affine.cpp: MLX affine; matmul_fp8_block.cpp: block-scaled FP8). Each computes rows [r0, r1) of y = x
// · Wᵀ for all n rows of x, every dot product accumulated in the same order whatever n, r0 and r1 are.
#include <cstdint>

#include "backend/cpu/mlx_affine_positions.h"
#include "backend/weight.h"

namespace qwenrt::cpu {

using RowKernel = void (*)(const float* x, int64_t n, int64_t k, const Weight& w, float* y, int64_t ldy, int64_t r0, int64_t r1);

void dense_rows(const float* x, int64_t n, int64_t k, const Weight& w, float* y, int64_t ldy, int64_t r0, int64_t r1);

// MLX affine (summed in the position order of mlx_affine_positions.h): AVX2 where the machine has
// it, else the scalar twin (same bits either way). The first forms take the activations prepared once
// for the layout of w (cpu::matmul_multi does so per call); the RowKernel forms prepare them.
void mlx_affine_rows(const mlx_affine::Activations& a, const Weight& w, float* y, int64_t ldy, int64_t r0, int64_t r1);
void mlx_affine_rows_scalar(const mlx_affine::Activations& a, const Weight& w, float* y, int64_t ldy, int64_t r0, int64_t r1);
void mlx_affine_rows(const float* x, int64_t n, int64_t k, const Weight& w, float* y, int64_t ldy, int64_t r0, int64_t r1);
void mlx_affine_rows_scalar(const float* x, int64_t n, int64_t k, const Weight& w, float* y, int64_t ldy, int64_t r0, int64_t r1);

// Block-scaled FP8 (e4m3): AVX2 where the machine has it, else the scalar twin (same bits either
// way, and the same bits as dense_rows over the dequantized matrix).
void fp8_block_rows(const float* x, int64_t n, int64_t k, const Weight& w, float* y, int64_t ldy, int64_t r0, int64_t r1);
void fp8_block_rows_scalar(const float* x, int64_t n, int64_t k, const Weight& w, float* y, int64_t ldy, int64_t r0, int64_t r1);

bool have_avx2();    // AVX2 + FMA + F16C on this machine
bool have_avx512();  // and AVX-512 F, DQ and VL (the prompt windows' wider register tiles: matmul_blocked.cpp)

}  // namespace qwenrt::cpu
