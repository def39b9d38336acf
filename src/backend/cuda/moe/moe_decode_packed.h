#pragma once
// moe_decode's kernels for packed experts (moe_decode_packed.cu); moe_decode dispatches here.
#include "backend/cuda/moe/moe.h"

namespace qwenrt::cuda {

// Error naming `what` unless ex's packed stacks suit the packed-expert kernels (one format, shapes
// [(experts (+1))·2I, H] and [(experts (+1))·H, I]); moe_decode_grouped checks the same.
void check_packed_experts(const MoeExperts& ex, const char* what);

void moe_decode_packed(const __nv_bfloat16* x, int64_t ldx, int64_t rows, const MoeExperts& experts, const int32_t* ids, const float* weights,
                       __nv_bfloat16* act, float* y, int64_t ldy, bool accumulate, cudaStream_t stream);

}  // namespace qwenrt::cuda
