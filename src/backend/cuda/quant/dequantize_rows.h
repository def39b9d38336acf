#pragma once
// Quantized matrices widened on the GPU: rows of a weight to a bf16 scratch matrix (prompt rows then
// take the cuBLAS product; only the rows asked for, never the whole model), and embedding rows to
// f32 on lookup. Values as quant_decode.cuh computes them (the CPU's dequantization), the bf16 copy
// rounded once to nearest even.
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "backend/cuda/quant/quant_matrix.h"

namespace qwenrt::cuda {

// out[(r - r0) · m.cols + c] = bf16(W[r, c]) for r in [r0, r0 + count). out 16-byte aligned.
void dequantize_rows(const QuantMatrix& m, int64_t r0, int64_t count, __nv_bfloat16* out, cudaStream_t stream);

// out[r, :] = W[token_r, :] in f32, with token_r = picks[from[r]] where from[r] >= 0, else tokens[r]
// (as cuda::embed_rows for a bf16 table).
void embed_quant_rows(const int32_t* tokens, const int32_t* from, const int32_t* picks, int64_t rows, const QuantMatrix& table, float* out,
                      cudaStream_t stream);

}  // namespace qwenrt::cuda
