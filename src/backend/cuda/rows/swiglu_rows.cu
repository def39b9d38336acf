// swiglu_rows: out[r, i] = bf16(silu(gate) · up) from f32 or bf16 products, one column or four
// per thread (swiglu_rows.h).
#include <algorithm>
#include <cstdint>

#include "backend/cuda/ptx/gate_math.cuh"
#include "backend/cuda/ptx/mma.cuh"
#include "backend/cuda/rows/row_launch.h"
#include "backend/cuda/rows/swiglu_rows.h"
#include "backend/cuda/runtime/chained_launch.h"
#include "backend/cuda/runtime/cuda_check.h"

namespace qwenrt::cuda {
namespace {
using namespace row_launch;

// Blocks along x cover a row's width, blocks along y its rows (looping past 65535 rows).
__device__ __forceinline__ float to_f32(float x) { return x; }
__device__ __forceinline__ float to_f32(__nv_bfloat16 x) { return __bfloat162float(x); }

template <typename In>
__global__ void swiglu_kernel(const In* gu, int64_t ld_gu, __nv_bfloat16* out, int64_t ld_out, int64_t rows, int64_t width) {
  chained_kernel_start();
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    const In* g = gu + r * ld_gu;
    __nv_bfloat16* o = out + r * ld_out;
    for (int64_t i = blockIdx.x * static_cast<int64_t>(kThreads) + threadIdx.x; i < width; i += static_cast<int64_t>(gridDim.x) * kThreads)
      o[i] = __float2bfloat16_rn(swiglu(to_f32(g[i]), to_f32(g[width + i])));
  }
}

// Four bf16 gate and up values as f32.
__device__ __forceinline__ float4 load4(const float* p) { return *reinterpret_cast<const float4*>(p); }
__device__ __forceinline__ float4 load4(const __nv_bfloat16* p) {
  const uint2 v = *reinterpret_cast<const uint2*>(p);
  const float2 lo = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&v.x));
  const float2 hi = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&v.y));
  return make_float4(lo.x, lo.y, hi.x, hi.y);
}

// Prompt-sized calls: four columns per thread, 16-byte loads and 8-byte stores (bandwidth-bound).
template <typename In>
__global__ void swiglu4_kernel(const In* gu, int64_t ld_gu, __nv_bfloat16* out, int64_t ld_out, int64_t rows, int64_t width) {
  chained_kernel_start();
  const int64_t quads = width / 4;
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    const In* g = gu + r * ld_gu;
    const In* u = gu + r * ld_gu + width;
    uint2* o = reinterpret_cast<uint2*>(out + r * ld_out);
    for (int64_t i = blockIdx.x * static_cast<int64_t>(kThreads) + threadIdx.x; i < quads; i += static_cast<int64_t>(gridDim.x) * kThreads) {
      const float4 a = load4(g + 4 * i), b = load4(u + 4 * i);
      const __nv_bfloat162 lo = __floats2bfloat162_rn(swiglu(a.x, b.x), swiglu(a.y, b.y));
      const __nv_bfloat162 hi = __floats2bfloat162_rn(swiglu(a.z, b.z), swiglu(a.w, b.w));
      o[i] = make_uint2(*reinterpret_cast<const uint32_t*>(&lo), *reinterpret_cast<const uint32_t*>(&hi));
    }
  }
}

template <typename In>
void swiglu_rows_of(const In* gu, int64_t ld_gu, __nv_bfloat16* out, int64_t ld_out, int64_t rows, int64_t width, cudaStream_t stream) {
  check_rows(rows, "swiglu_rows");
  if (rows == 0) return;
  const bool vector = rows > 8 && width % 4 == 0 && ld_gu % 4 == 0 && ld_out % 4 == 0 && reinterpret_cast<uintptr_t>(gu) % (4 * sizeof(In)) == 0 &&
                      reinterpret_cast<uintptr_t>(out) % 8 == 0;
  const int64_t per_thread = vector ? 4 : 1;
  const int64_t across = std::min<int64_t>((width / per_thread + kThreads - 1) / kThreads, 1024);
  const dim3 grid(static_cast<unsigned>(across), static_cast<unsigned>(std::min<int64_t>(rows, kMaxGridY)));
  launch_chained(vector ? swiglu4_kernel<In> : swiglu_kernel<In>, grid, dim3(kThreads), 0, stream, gu, ld_gu, out, ld_out, rows, width);
  QWENRT_CUDA_CHECK_LAUNCH();
}
}  // namespace

void swiglu_rows(const float* gu, int64_t ld_gu, __nv_bfloat16* out, int64_t ld_out, int64_t rows, int64_t width, cudaStream_t stream) {
  swiglu_rows_of(gu, ld_gu, out, ld_out, rows, width, stream);
}

void swiglu_rows(const __nv_bfloat16* gu, int64_t ld_gu, __nv_bfloat16* out, int64_t ld_out, int64_t rows, int64_t width, cudaStream_t stream) {
  swiglu_rows_of(gu, ld_gu, out, ld_out, rows, width, stream);
}

}  // namespace qwenrt::cuda
