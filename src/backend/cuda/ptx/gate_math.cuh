#pragma once
// The scalar activations of the gates, with the CPU ops' formulas (backend/cpu/ops.h): PyTorch's
// softplus is linear above 20.
namespace qwenrt::cuda {

__device__ __forceinline__ float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
__device__ __forceinline__ float silu(float x) { return x / (1.0f + expf(-x)); }
// The same with the hardware's approximate exponential and division (relative error ~1e-6, far
// below the bf16 rounding of what it feeds): the chunked window's conv and gated norm, where the
// exact forms were a large share of the instructions. silu_fast(x) = 0 for x < −88 (e^{−x} = inf).
__device__ __forceinline__ float silu_fast(float x) { return __fdividef(x, 1.0f + __expf(-x)); }
__device__ __forceinline__ float softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }
// The FFN's gated activation silu(g)·u, one formula for every kernel that forms it (same bits).
__device__ __forceinline__ float swiglu(float g, float u) { return g / (1.0f + __expf(-g)) * u; }

}  // namespace qwenrt::cuda
