#pragma once
// The model's weights on one GPU: every matrix as bf16 (f16/f32 checkpoints are rounded once at
// upload), every small vector as f32, all in one device allocation.
#include <cuda_bf16.h>

#include <cstdint>
#include <vector>

#include "backend/cuda/runtime/device_buffer.h"
#include "model/config.h"
#include "model/weights.h"

namespace qwenrt {

struct CudaMatrix {
  const __nv_bfloat16* data = nullptr;  // [rows, cols]
  int64_t rows = 0, cols = 0;
};

struct CudaLayerWeights {
  LayerKind kind;
  const float* input_norm = nullptr;
  const float* post_norm = nullptr;
  // Gated DeltaNet
  CudaMatrix in_qkv, in_z, in_b, in_a, out_proj;
  const float *conv = nullptr, *dt_bias = nullptr, *neg_exp_a = nullptr, *gdn_norm = nullptr;
  // Gated attention
  CudaMatrix q_proj, k_proj, v_proj, o_proj;
  const float *q_norm = nullptr, *k_norm = nullptr;
  // SwiGLU MLP
  CudaMatrix gate, up, down;
};

struct CudaWeights {
  cuda::DeviceBuffer arena;
  CudaMatrix embed, lm_head;
  const float* final_norm = nullptr;
  std::vector<CudaLayerWeights> layers;
};

// Uploads to the current device, showing progress on stderr when it is a terminal. Error when the
// GPU lacks the memory (saying how much is needed and free). MoE layers are not uploaded: the
// caller (CudaForward) refuses MoE configs first.
CudaWeights upload_weights(const ModelWeights& weights);

}  // namespace qwenrt
