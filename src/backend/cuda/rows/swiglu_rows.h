#pragma once
// The gated FFN activation on the GPU: SwiGLU of gate and up products side by side in a row.
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace qwenrt::cuda {

// out[r, i] = silu(gu[r, i]) · gu[r, width + i] in bf16 (gate and up side by side in one row).
void swiglu_rows(const float* gu, int64_t ld_gu, __nv_bfloat16* out, int64_t ld_out, int64_t rows, int64_t width, cudaStream_t stream);
// The same from gate and up products already rounded to bf16 (prompt-sized FFNs: half the bytes).
void swiglu_rows(const __nv_bfloat16* gu, int64_t ld_gu, __nv_bfloat16* out, int64_t ld_out, int64_t rows, int64_t width, cudaStream_t stream);

}  // namespace qwenrt::cuda
