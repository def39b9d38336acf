#pragma once
// RMSNorm rows on the GPU: f32 rows normalised and scaled into the bf16 rows the matrix products
// read (the GPU side of backend/cpu/ops.h's rms_norm).
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "backend/cuda/ptx/non_finite_probe.h"

namespace qwenrt::cuda {

// y[r, :] = x[src_r, :] · rsqrt(mean(x²) + eps) · w in bf16, with src_r = row_index[r] when given
// (the final norm of only the rows whose logits are wanted), else r. A row whose sum of squares is
// not finite (a NaN or Inf in it, or an overflow) is reported to `probe` as row src_r.
void rms_norm_rows(const float* x, int64_t ldx, const float* w, __nv_bfloat16* y, int64_t ldy, int64_t rows, int64_t width, float eps,
                   cudaStream_t stream, const int32_t* row_index = nullptr, const NonFiniteProbe& probe = {});

}  // namespace qwenrt::cuda
