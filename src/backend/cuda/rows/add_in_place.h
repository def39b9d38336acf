#pragma once
// The residual add on the GPU: y += x over a flat range of floats.
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace qwenrt::cuda {

// y += x, elementwise over n floats.
void add_in_place(float* y, const float* x, int64_t n, cudaStream_t stream);

}  // namespace qwenrt::cuda
