// moe_decode: the experts of a few decode rows, streaming only the selected experts' weights.
//
// gate/up: one warp per (row, slot, two FFN columns): the dot products of the row with the expert's
// gate and up rows, lane-strided 16-byte pieces along H, reduced across the warp by a butterfly
// (one fixed order), then act = bf16(silu(g) · u) as the dense FFN rounds it.
// down: one warp per (row, two output columns): for each slot the dot product of its act row with
// the expert's down row, all slots' loads in flight together, then the sum over slots in slot order
// weighted by the routing weights. Nothing depends on the other rows: batch-invariant bit for bit.
#include <algorithm>

#include "backend/cuda/moe/moe.h"
#include "backend/cuda/ptx/gate_math.cuh"
#include "backend/cuda/ptx/mma.cuh"
#include "backend/cuda/runtime/chained_launch.h"
#include "backend/cuda/runtime/cuda_check.h"
#include "core/error.h"

namespace qwenrt::cuda {
namespace {

using bf16 = __nv_bfloat16;
constexpr int kWarps = 4;
constexpr int kColsPerWarp = 2;

// Σ of the 8 products of two 16-byte bf16 pieces, in order, added to acc.
__device__ __forceinline__ float dot8(const uint4& a, const uint4& b, float acc) {
  const __nv_bfloat162* x = reinterpret_cast<const __nv_bfloat162*>(&a);
  const __nv_bfloat162* w = reinterpret_cast<const __nv_bfloat162*>(&b);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 xf = __bfloat1622float2(x[i]), wf = __bfloat1622float2(w[i]);
    acc = fmaf(xf.x, wf.x, acc);
    acc = fmaf(xf.y, wf.y, acc);
  }
  return acc;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// The 16-byte pieces of a row of n pieces that lane `lane` takes, lane + 32·p for p < kP (kP the
// smallest power of two with 32·kP >= n): straight-line code, every load of the row in flight at
// once, and the order of the sum the same as a strided loop's.
int pieces_per_lane(int64_t pieces) {
  int p = 1;
  while (32 * p < pieces) p *= 2;
  return p;
}

// Router logits of decode rows: one warp per weight row (router rows, then the shared gate's) for
// every activation row, so the 1-2 MB router spreads over many multiprocessors.
template <int kP>
__global__ void __launch_bounds__(kWarps * 32)
    moe_router_kernel(const bf16* x, int64_t ldx, int rows, const bf16* w, int w_rows, int64_t H, float* logits, int64_t ld) {
  chained_kernel_start();
  const int lane = threadIdx.x % 32;
  const int r = blockIdx.x * kWarps + threadIdx.x / 32;
  if (r >= w_rows) return;
  const int64_t pieces = H / 8;
  uint4 wv[kP];
#pragma unroll
  for (int p = 0; p < kP; ++p)
    if (lane + 32 * p < pieces) wv[p] = load_stream16(w + r * H + 8 * (lane + 32 * p));
  for (int t = 0; t < rows; ++t) {
    float acc = 0;
#pragma unroll
    for (int p = 0; p < kP; ++p)
      if (lane + 32 * p < pieces) acc = dot8(load_shared16(x + t * ldx + 8 * (lane + 32 * p)), wv[p], acc);
    acc = warp_sum(acc);
    if (lane == 0) logits[t * ld + r] = acc;
  }
}

// grid (ceil(I / (kWarps·kColsPerWarp)), rows·slots)
template <int kP>
__global__ void __launch_bounds__(kWarps * 32) moe_decode_gate_up_kernel(const bf16* x, int64_t ldx, MoeExperts ex, const int32_t* ids, bf16* act) {
  chained_kernel_start();
  const int lane = threadIdx.x % 32;
  const int pair = blockIdx.y;  // row · slots + slot
  const int slots = ex.slots;
  const int64_t row = pair / slots, H = ex.hidden, I = ex.inter;
  const int64_t e = ids[pair];
  const int64_t col0 = (static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32) * kColsPerWarp;
  if (col0 >= I) return;
  const bf16* xr = x + row * ldx;
  const bf16* gate = ex.gate_up + e * 2 * I * H;
  const bf16* up = gate + I * H;
  const int64_t pieces = H / 8;
  uint4 gw[kColsPerWarp][kP], uw[kColsPerWarp][kP];
#pragma unroll
  for (int j = 0; j < kColsPerWarp; ++j)
#pragma unroll
    for (int p = 0; p < kP; ++p)
      if (col0 + j < I && lane + 32 * p < pieces) {
        gw[j][p] = load_stream16(gate + (col0 + j) * H + 8 * (lane + 32 * p));
        uw[j][p] = load_stream16(up + (col0 + j) * H + 8 * (lane + 32 * p));
      }
  float g[kColsPerWarp] = {}, u[kColsPerWarp] = {};
#pragma unroll
  for (int p = 0; p < kP; ++p) {
    if (lane + 32 * p >= pieces) break;
    const uint4 xv = load_shared16(xr + 8 * (lane + 32 * p));
#pragma unroll
    for (int j = 0; j < kColsPerWarp; ++j)
      if (col0 + j < I) {
        g[j] = dot8(xv, gw[j][p], g[j]);
        u[j] = dot8(xv, uw[j][p], u[j]);
      }
  }
#pragma unroll
  for (int j = 0; j < kColsPerWarp; ++j) {
    const float gs = warp_sum(g[j]), us = warp_sum(u[j]);
    if (lane == 0 && col0 + j < I) act[static_cast<int64_t>(pair) * I + col0 + j] = __float2bfloat16_rn(swiglu(gs, us));
  }
}

// grid (ceil(H / (kWarps·kColsPerWarp)), rows)
template <int kP>
__global__ void __launch_bounds__(kWarps * 32)
    moe_decode_down_kernel(const bf16* act, MoeExperts ex, const int32_t* ids, const float* weights, float* y, int64_t ldy, bool accumulate) {
  chained_kernel_start();
  const int lane = threadIdx.x % 32;
  const int64_t row = blockIdx.y, H = ex.hidden, I = ex.inter;
  const int slots = ex.slots;
  const int64_t col0 = (static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32) * kColsPerWarp;
  if (col0 >= H) return;
  float part[kColsPerWarp][kMoeMaxSlots] = {};
  const int64_t pieces = I / 8;
#pragma unroll
  for (int s = 0; s < kMoeMaxSlots; ++s) {
    if (s >= slots) break;
    const int64_t e = ids[row * slots + s];
    const bf16* a = act + (row * slots + s) * I;
    const bf16* d = ex.down + e * H * I;
#pragma unroll
    for (int p = 0; p < kP; ++p) {
      const int64_t c = lane + 32 * p;
      if (c >= pieces) break;
      const uint4 av = load_shared16(a + 8 * c);
#pragma unroll
      for (int j = 0; j < kColsPerWarp; ++j)
        if (col0 + j < H) part[j][s] = dot8(av, load_stream16(d + (col0 + j) * I + 8 * c), part[j][s]);
    }
  }
#pragma unroll
  for (int j = 0; j < kColsPerWarp; ++j) {
    float sum = 0;
#pragma unroll
    for (int s = 0; s < kMoeMaxSlots; ++s) {
      if (s >= slots) break;
      sum = fmaf(weights[row * slots + s], warp_sum(part[j][s]), sum);
    }
    if (lane == 0 && col0 + j < H) {
      float* out = y + row * ldy + col0 + j;
      *out = accumulate ? *out + sum : sum;
    }
  }
}

template <int kP>
void launch_router(const bf16* x, int64_t ldx, int rows, const bf16* w, int w_rows, int64_t H, float* logits, int64_t ld, cudaStream_t stream) {
  const dim3 grid((w_rows + kWarps - 1) / kWarps);
  launch_chained(moe_router_kernel<kP>, grid, dim3(kWarps * 32), 0, stream, x, ldx, rows, w, w_rows, H, logits, ld);
  QWENRT_CUDA_CHECK_LAUNCH();
}

template <int kP>
void launch_gate_up(const bf16* x, int64_t ldx, int64_t rows, const MoeExperts& ex, const int32_t* ids, bf16* act, cudaStream_t stream) {
  constexpr int per_block = kWarps * kColsPerWarp;
  const dim3 gu_grid(static_cast<unsigned>((ex.inter + per_block - 1) / per_block), static_cast<unsigned>(rows * ex.slots));
  launch_chained(moe_decode_gate_up_kernel<kP>, gu_grid, dim3(kWarps * 32), 0, stream, x, ldx, ex, ids, act);
  QWENRT_CUDA_CHECK_LAUNCH();
}

template <int kP>
void launch_down(const bf16* act, int64_t rows, const MoeExperts& ex, const int32_t* ids, const float* weights, float* y, int64_t ldy,
                 bool accumulate, cudaStream_t stream) {
  constexpr int per_block = kWarps * kColsPerWarp;
  const dim3 down_grid(static_cast<unsigned>((ex.hidden + per_block - 1) / per_block), static_cast<unsigned>(rows));
  launch_chained(moe_decode_down_kernel<kP>, down_grid, dim3(kWarps * 32), 0, stream, act, ex, ids, weights, y, ldy, accumulate);
  QWENRT_CUDA_CHECK_LAUNCH();
}

// Calls f.template operator()<kP>() for the bucket of `pieces` (at most 32·16 pieces: rows of 4096).
template <typename F>
void with_pieces(int64_t pieces, const char* what, F&& f) {
  switch (pieces_per_lane(pieces)) {
    case 1: return f.template operator()<1>();
    case 2: return f.template operator()<2>();
    case 4: return f.template operator()<4>();
    case 8: return f.template operator()<8>();
    case 16: return f.template operator()<16>();
    default: fail(what, ": rows of ", 8 * pieces, " elements are longer than the kernels are built for (4096)");
  }
}

}  // namespace

std::size_t moe_decode_act_bytes(int64_t rows, const MoeExperts& ex) { return static_cast<std::size_t>(rows * ex.slots * ex.inter) * sizeof(bf16); }

void moe_router_logits(const bf16* x, int64_t ldx, int64_t rows, const bf16* router, int router_rows, int64_t H, float* logits, int64_t ld,
                       cudaStream_t stream) {
  if (rows < 0 || rows > kMoeDecodeRows) fail("moe_router_logits: ", rows, " rows (at most ", kMoeDecodeRows, ")");
  if (H % 8 != 0 || ldx % 8 != 0 || reinterpret_cast<uintptr_t>(x) % 16 != 0 || reinterpret_cast<uintptr_t>(router) % 16 != 0)
    fail("moe_router_logits: H and the row stride must be multiples of 8 with 16-byte aligned rows");
  if (rows == 0) return;
  with_pieces(H / 8, "moe_router_logits",
              [&]<int kP>() { launch_router<kP>(x, ldx, static_cast<int>(rows), router, router_rows, H, logits, ld, stream); });
}

void moe_decode(const bf16* x, int64_t ldx, int64_t rows, const MoeExperts& ex, const int32_t* ids, const float* weights, bf16* act, float* y,
                int64_t ldy, bool accumulate, cudaStream_t stream) {
  if (rows < 0 || rows > kMoeDecodeRows) fail("moe_decode: ", rows, " rows (at most ", kMoeDecodeRows, ")");
  if (ex.hidden % 8 != 0 || ex.inter % 8 != 0 || ldx % 8 != 0 || reinterpret_cast<uintptr_t>(x) % 16 != 0)
    fail("moe_decode: H, I and the row stride must be multiples of 8 with 16-byte aligned rows");
  if (rows == 0) return;
  with_pieces(ex.hidden / 8, "moe_decode", [&]<int kP>() { launch_gate_up<kP>(x, ldx, rows, ex, ids, act, stream); });
  with_pieces(ex.inter / 8, "moe_decode", [&]<int kP>() { launch_down<kP>(act, rows, ex, ids, weights, y, ldy, accumulate, stream); });
}

}  // namespace qwenrt::cuda
