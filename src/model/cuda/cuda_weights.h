#pragma once
// The model's weights on one GPU, in one device allocation: every dense matrix as bf16 (f16/f32
// checkpoints rounded once at upload; synthetic weights made on the device), every quantized one
// packed (quant_upload.h), every small vector as f32. Each Weight's and ParamVector's `bound` records where its copy is.
#include "backend/cuda/runtime/device_buffer.h"
#include "model/weights.h"

namespace qwenrt {

// Uploads to the current device, showing progress on stderr when it is a terminal, and returns the
// allocation that holds them. Error when the GPU lacks the memory (saying how much is needed and
// free). MoE layers are not uploaded: CudaForward refuses MoE configs first.
cuda::DeviceBuffer upload_weights(ModelWeights& weights);

}  // namespace qwenrt
