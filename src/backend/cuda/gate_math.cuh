#pragma once
// The scalar activations of the gates, with the CPU ops' formulas (backend/cpu/ops.h): PyTorch's
// softplus is linear above 20.
namespace qwenrt::cuda {

__device__ __forceinline__ float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
__device__ __forceinline__ float silu(float x) { return x / (1.0f + expf(-x)); }
__device__ __forceinline__ float softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }
// The FFN's gated activation silu(g)·u, one formula for every kernel that forms it (same bits).
__device__ __forceinline__ float swiglu(float g, float u) { return g / (1.0f + __expf(-g)) * u; }

}  // namespace qwenrt::cuda
