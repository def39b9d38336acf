#pragma once
// Per-row ops of the CUDA backend (the GPU side of backend/cpu/ops.h): embedding gather, RMSNorm
// into the bf16 rows the matrix products read, SwiGLU, residual add. One block per row.
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace qwenrt::cuda {

// out[r, :] = table[token_r, :] widened to f32. Row r's token is picks[from[r]] where from[r] >= 0
// (the pick of an earlier step, still on the device), else tokens[r].
void embed_rows(const int32_t* tokens, const int32_t* from, const int32_t* picks, int64_t rows, const __nv_bfloat16* table,
                int64_t width, float* out, cudaStream_t stream);

// y[r, :] = x[src_r, :] · rsqrt(mean(x²) + eps) · w in bf16, with src_r = row_index[r] when given
// (the final norm of only the rows whose logits are wanted), else r.
void rms_norm_rows(const float* x, int64_t ldx, const float* w, __nv_bfloat16* y, int64_t ldy, int64_t rows,
                   int64_t width, float eps, cudaStream_t stream, const int32_t* row_index = nullptr);

// out[r, i] = silu(gu[r, i]) · gu[r, width + i] in bf16 (gate and up side by side in one row).
void swiglu_rows(const float* gu, int64_t ld_gu, __nv_bfloat16* out, int64_t ld_out, int64_t rows, int64_t width,
                 cudaStream_t stream);
// The same from gate and up products already rounded to bf16 (prompt-sized FFNs: half the bytes).
void swiglu_rows(const __nv_bfloat16* gu, int64_t ld_gu, __nv_bfloat16* out, int64_t ld_out, int64_t rows, int64_t width,
                 cudaStream_t stream);

// y += x, elementwise over n floats.
void add_in_place(float* y, const float* x, int64_t n, cudaStream_t stream);

// out[r] = the column of row r's largest value, the first of equal ones (as std::max_element);
// NaN counts as −∞. Greedy decoding picks its tokens here instead of moving the logits to the host.
// With a workspace of argmax_workspace_bytes(rows, width), rows as wide as a vocabulary are
// scanned by many blocks at once (one block streams ~1 MB in 16 us); without, one block per row.
std::size_t argmax_workspace_bytes(int64_t rows, int64_t width);
// `mirror`, when given, receives the same picks (mapped host memory: no copy back needed).
void argmax_rows(const float* x, int64_t ldx, int64_t rows, int64_t width, int32_t* out, cudaStream_t stream,
                 void* workspace = nullptr, std::size_t workspace_bytes = 0, int32_t* mirror = nullptr);

// dst[0, bytes) = src[0, bytes) by a kernel, both 16-byte aligned and bytes a multiple of 16: a
// step's metadata read from mapped host memory inside a captured graph, where a copy in the stream
// would add a copy engine's round trip between two steps.
void copy_in_kernel(const void* src, void* dst, std::size_t bytes, cudaStream_t stream);

// f32 → bf16 rows (round to nearest even), for matrix-product inputs computed in f32.
void to_bf16_rows(const float* x, int64_t ldx, __nv_bfloat16* y, int64_t ldy, int64_t rows, int64_t width,
                  cudaStream_t stream);

}  // namespace qwenrt::cuda
