#pragma once
// f32 rows rounded to bf16 on the GPU, for matrix-product inputs computed in f32.
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace qwenrt::cuda {

// f32 → bf16 rows (round to nearest even), for matrix-product inputs computed in f32.
void to_bf16_rows(const float* x, int64_t ldx, __nv_bfloat16* y, int64_t ldy, int64_t rows, int64_t width, cudaStream_t stream);

}  // namespace qwenrt::cuda
