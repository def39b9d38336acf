// moe_route: one warp per row, the CPU's routing (model/cpu/feed_forward.cpp) in f32: softmax over
// the router logits, the k largest probabilities (ties to the lower index), divided by their sum
// taken in pick order; the shared expert's slot carries sigmoid(gate logit).
#include <cfloat>

#include "backend/cuda/moe/moe.h"
#include "backend/cuda/ptx/gate_math.cuh"
#include "backend/cuda/ptx/mma.cuh"
#include "backend/cuda/runtime/chained_launch.h"
#include "backend/cuda/runtime/cuda_check.h"
#include "core/error.h"

namespace qwenrt::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kPerLane = kMoeMaxExperts / 32;

__global__ void __launch_bounds__(kWarps * 32)
    moe_route_kernel(const float* logits, int64_t ld, int64_t rows, int E, int k, bool shared, int32_t* ids, float* weights) {
  chained_kernel_start();
  const int lane = threadIdx.x % 32;
  const int64_t r = static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32;
  if (r >= rows) return;
  const float* l = logits + r * ld;
  float p[kPerLane];
  float mx = -FLT_MAX;
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    const int e = lane + 32 * i;
    p[i] = e < E ? l[e] : -FLT_MAX;
    mx = fmaxf(mx, p[i]);
  }
#pragma unroll
  for (int o = 16; o > 0; o /= 2) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
  float sum = 0;
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    p[i] = lane + 32 * i < E ? expf(p[i] - mx) : 0.0f;
    sum += p[i];
  }
#pragma unroll
  for (int o = 16; o > 0; o /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, o);
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) p[i] = lane + 32 * i < E ? p[i] / sum : -1.0f;  // -1: no expert there

  const int slots = k + (shared ? 1 : 0);
  int32_t* row_ids = ids + r * slots;
  float* row_w = weights + r * slots;
  float top = 0, mine = 0;
  int my_slot = -1;
  for (int j = 0; j < k; ++j) {
    // This lane's best (largest p, then lowest index), then the warp's.
    float best = -2.0f;
    int best_e = 0x7fffffff;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i)
      if (p[i] > best) best = p[i], best_e = lane + 32 * i;  // ascending index: ties keep the lower
#pragma unroll
    for (int o = 16; o > 0; o /= 2) {
      const float ob = __shfl_xor_sync(0xffffffffu, best, o);
      const int oe = __shfl_xor_sync(0xffffffffu, best_e, o);
      if (ob > best || (ob == best && oe < best_e)) best = ob, best_e = oe;
    }
    top += best;
    if (best_e % 32 == lane) {
      // The owner takes it out of the running and remembers its slot.
#pragma unroll
      for (int i = 0; i < kPerLane; ++i)
        if (lane + 32 * i == best_e) p[i] = -1.0f;
    }
    if (lane == j % 32) my_slot = j, mine = best;
    if (lane == 0) row_ids[j] = best_e;
  }
  // Slot j's weight, written by lane j % 32 (k <= 16: one slot per lane).
  if (my_slot >= 0) row_w[my_slot] = mine / top;
  if (shared && lane == 0) {
    row_ids[k] = E;
    row_w[k] = sigmoid(l[E]);
  }
}

}  // namespace

void moe_route(const float* logits, int64_t ld, int64_t rows, const MoeExperts& x, int32_t* ids, float* weights, cudaStream_t stream) {
  if (x.experts < 1 || x.experts > kMoeMaxExperts || x.top_k < 1 || x.top_k > kMoeMaxExpertsPerToken || x.top_k > x.experts)
    fail("moe_route: ", x.experts, " experts with top-", x.top_k, " is outside what the kernels are built for (at most ", kMoeMaxExperts,
         " experts, top-", kMoeMaxExpertsPerToken, ")");
  if (x.slots != x.top_k + (x.shared ? 1 : 0)) fail("moe_route: slots ", x.slots, " is not top-k plus the shared expert");
  if (ld < x.experts + (x.shared ? 1 : 0)) fail("moe_route: logit row stride ", ld, " is shorter than the logits");
  if (rows <= 0) return;
  const unsigned blocks = static_cast<unsigned>((rows + kWarps - 1) / kWarps);
  const dim3 grid(blocks);
  launch_chained(moe_route_kernel, grid, dim3(kWarps * 32), 0, stream, logits, ld, rows, x.experts, x.top_k, x.shared, ids, weights);
  QWENRT_CUDA_CHECK_LAUNCH();
}

}  // namespace qwenrt::cuda
