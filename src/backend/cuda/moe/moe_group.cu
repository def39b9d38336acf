// moe_group and moe_gather (moe_group.h).
#include <algorithm>

#include "backend/cuda/moe/moe.h"
#include "backend/cuda/moe/moe_group.h"
#include "backend/cuda/ptx/mma.cuh"
#include "backend/cuda/runtime/chained_launch.h"
#include "backend/cuda/runtime/cuda_check.h"

namespace qwenrt::cuda {
namespace {

constexpr int kGroupThreads = 1024;
constexpr std::size_t kGroupSmem = (3 * kMoeMaxExperts + 4) * sizeof(int32_t);

__global__ void __launch_bounds__(kGroupThreads) moe_group_kernel(const int32_t* ids, int64_t pairs, int slots, int groups, int64_t tiles, int run,
                                                                  int32_t* sorted, int32_t* place, int32_t* tile_expert) {
  chained_kernel_start();
  extern __shared__ float4 smem_raw[];
  int32_t* count = reinterpret_cast<int32_t*>(smem_raw);  // [groups]
  int32_t* cursor = count + kMoeMaxExperts + 1;           // [groups]
  int32_t* first_tile = cursor + kMoeMaxExperts + 1;      // [groups + 1]
  for (int e = threadIdx.x; e < groups; e += kGroupThreads) count[e] = 0;
  for (int64_t p = threadIdx.x; p < tiles * run; p += kGroupThreads) sorted[p] = -1;
  __syncthreads();
  for (int64_t n = threadIdx.x; n < pairs; n += kGroupThreads) atomicAdd(&count[ids[n]], 1);
  __syncthreads();
  if (threadIdx.x == 0) {
    int32_t t = 0;
    for (int e = 0; e < groups; ++e) {
      first_tile[e] = t;
      cursor[e] = t * run;
      t += (count[e] + run - 1) / run;
    }
    first_tile[groups] = t;
  }
  __syncthreads();
  for (int e = threadIdx.x; e < groups; e += kGroupThreads)
    for (int32_t t = first_tile[e]; t < first_tile[e + 1]; ++t) tile_expert[t] = e;
  for (int64_t t = first_tile[groups] + threadIdx.x; t < tiles; t += kGroupThreads) tile_expert[t] = -1;
  for (int64_t n = threadIdx.x; n < pairs; n += kGroupThreads) {
    const int32_t at = atomicAdd(&cursor[ids[n]], 1);
    sorted[at] = static_cast<int32_t>(n / slots);
    place[n] = at;
  }
}

// Four columns per thread.
__global__ void moe_gather_kernel(const float* out, const int32_t* place, const float* weights, int slots, int64_t H, int64_t rows, float* y,
                                  int64_t ldy, bool accumulate) {
  chained_kernel_start();
  const int64_t c = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * 4;
  if (c >= H) return;
  for (int64_t row = blockIdx.y; row < rows; row += gridDim.y) {
    float4 sum = make_float4(0, 0, 0, 0);
    for (int s = 0; s < slots; ++s) {
      const float w = weights[row * slots + s];
      const float4 v = *reinterpret_cast<const float4*>(out + static_cast<int64_t>(place[row * slots + s]) * H + c);
      sum.x = fmaf(w, v.x, sum.x);
      sum.y = fmaf(w, v.y, sum.y);
      sum.z = fmaf(w, v.z, sum.z);
      sum.w = fmaf(w, v.w, sum.w);
    }
    float4* dst = reinterpret_cast<float4*>(y + row * ldy + c);
    if (accumulate) {
      const float4 h = *dst;
      sum = make_float4(h.x + sum.x, h.y + sum.y, h.z + sum.z, h.w + sum.w);
    }
    *dst = sum;
  }
}

}  // namespace

void moe_group(const int32_t* ids, int64_t pairs, int slots, int groups, int64_t tiles, int run, int32_t* sorted, int32_t* place,
               int32_t* tile_expert, cudaStream_t stream) {
  launch_chained(moe_group_kernel, dim3(1), dim3(kGroupThreads), kGroupSmem, stream, ids, pairs, slots, groups, tiles, run, sorted, place,
                 tile_expert);
  QWENRT_CUDA_CHECK_LAUNCH();
}

void moe_gather(const float* out, const int32_t* place, const float* weights, int slots, int64_t H, int64_t rows, float* y, int64_t ldy,
                bool accumulate, cudaStream_t stream) {
  constexpr int kGatherThreads = 256;
  const dim3 grid(static_cast<unsigned>((H / 4 + kGatherThreads - 1) / kGatherThreads), static_cast<unsigned>(std::min<int64_t>(rows, 65535)));
  launch_chained(moe_gather_kernel, grid, dim3(kGatherThreads), 0, stream, out, place, weights, slots, H, rows, y, ldy, accumulate);
  QWENRT_CUDA_CHECK_LAUNCH();
}

}  // namespace qwenrt::cuda
