#pragma once
// The scalar activations of the gates, with the CPU ops' formulas (backend/cpu/ops.h): PyTorch's
// softplus is linear above 20.
namespace qwenrt::cuda {

__device__ __forceinline__ float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
__device__ __forceinline__ float silu(float x) { return x / (1.0f + expf(-x)); }
__device__ __forceinline__ float softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

}  // namespace qwenrt::cuda
