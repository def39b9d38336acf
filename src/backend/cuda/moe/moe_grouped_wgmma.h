#pragma once
// moe_window's grouped GEMMs for prompt windows (128-row tiles) on Hopper's warpgroup products
// (wgmma, sm_90a): the same tiles, grouping and epilogues as the mma.sync kernel in moe_window.cu,
// which other GPUs (and QWENRT_CUDA_MOE_WGMMA=0) run.
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "backend/cuda/moe/moe.h"

namespace qwenrt::cuda {

constexpr int kMoeWgmmaTileRows = 128;

// Whether 128-row tiles take this path: an sm_90a build on a Hopper GPU (wgmma_available()) and
// QWENRT_CUDA_MOE_WGMMA not 0.
bool moe_wgmma_enabled();

// gate/up with SwiGLU into act, then down into out (f32), over `tiles` tiles of kMoeWgmmaTileRows
// places: `sorted` gives each place's x row (-1: padding), `tile_expert` each tile's expert (-1:
// unused tile). As moe_window.cu's grouped_gemms.
void moe_grouped_gemms_wgmma(const __nv_bfloat16* x, int64_t ldx, int64_t tiles, const MoeExperts& ex, const int32_t* sorted,
                             const int32_t* tile_expert, __nv_bfloat16* act, float* out, cudaStream_t stream);

}  // namespace qwenrt::cuda
