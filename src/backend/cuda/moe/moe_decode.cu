// moe_decode: the experts of a few decode rows, streaming only the selected experts' weights.
//
// gate/up: one warp per (row, slot, two FFN columns): the dot products of the row with the expert's
// gate and up rows, lane-strided 16-byte pieces along H (four pieces' loads in flight at once),
// reduced across the warp by a butterfly (one fixed order), then act = bf16(silu(g) · u) as the
// dense FFN rounds it.
// down: one warp per (row, output column): for each slot the dot product of its act row with the
// expert's down row, all slots' loads in flight together, then the sum over slots in slot order
// weighted by the routing weights. Nothing depends on the other rows: batch-invariant bit for bit.
#include <algorithm>

#include "backend/cuda/moe/moe.h"
#include "backend/cuda/moe/moe_decode_packed.h"
#include "backend/cuda/quant/dequantize_rows.h"
#include "backend/cuda/ptx/gate_math.cuh"
#include "backend/cuda/ptx/mma.cuh"
#include "backend/cuda/runtime/chained_launch.h"
#include "backend/cuda/runtime/cuda_check.h"
#include "core/error.h"

namespace qwenrt::cuda {
namespace {

using bf16 = __nv_bfloat16;
constexpr int kWarps = 4;
// The down launch's shared memory (a row's act rows): 17 slots of I = 3,072 fit (Qwen 3.5 MoE: I <= 1,024).
constexpr std::size_t kMoeDecodeDownMaxSmem = 112 * 1024;

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

// grid (ceil(I / (kWarps·kColsPerWarp)), rows·slots), dynamic shared memory H bf16 (the row). The
// block's warps all read the same activation row: it is copied into shared memory once, while the
// first weights' loads are in flight, so a lane holds only weights across a wait. kBatch pieces a
// lane at a time, all their loads issued before the first product, at 96 registers: five blocks a
// multiprocessor, so 35B-A3B's 576 blocks of one row run in one wave (four pieces took 121
// registers: 528 resident blocks and a second wave; capped at 96 they spill; two pieces
// double-buffered measured the same as two). H100, 35B-A3B, with the norm and add launches gone
// too: batch 1 312 -> 321 tok/s, batch 8 883 -> 878 (several waves there, where four pieces kept
// more bytes in flight: a row-count choice of depth is not measured yet).
constexpr int kColsPerWarp = 2;
constexpr int kBatch = 2;
__global__ void __launch_bounds__(kWarps * 32, 5) moe_decode_gate_up_kernel(const bf16* x, int64_t ldx, MoeExperts ex, const int32_t* ids, bf16* act) {
  extern __shared__ float4 smem_raw[];
  uint4* xs = reinterpret_cast<uint4*>(smem_raw);  // [H / 8] pieces of the row
  chained_kernel_start();
  const int lane = threadIdx.x % 32;
  const int pair = blockIdx.y;  // row · slots + slot
  const int slots = ex.slots;
  const int64_t row = pair / slots, H = ex.hidden, I = ex.inter;
  const int64_t e = ids[pair];
  const int64_t col0 = (static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32) * kColsPerWarp;
  const bf16* gate = ex.gate_up + e * 2 * I * H;
  const bf16* up = gate + I * H;
  float g[kColsPerWarp] = {}, u[kColsPerWarp] = {};
  const int64_t pieces = H / 8;
  const int cols = static_cast<int>(std::max<int64_t>(0, std::min<int64_t>(kColsPerWarp, I - col0)));
  // This lane's first piece of each column's gate and up rows (columns past I read column 0).
  const bf16 *gp[kColsPerWarp], *upp[kColsPerWarp];
#pragma unroll
  for (int j = 0; j < kColsPerWarp; ++j) {
    const int64_t c = j < cols ? col0 + j : 0;
    gp[j] = gate + c * H + 8 * lane;
    upp[j] = up + c * H + 8 * lane;
  }
  uint4 gw[kBatch][kColsPerWarp], uw[kBatch][kColsPerWarp];
  auto load_batch = [&](int64_t c0) {
    const int64_t off = 8 * (c0 - lane);
#pragma unroll
    for (int b = 0; b < kBatch; ++b)
#pragma unroll
      for (int j = 0; j < kColsPerWarp; ++j)
        if (c0 + 32 * b < pieces) {
          gw[b][j] = load_stream16(gp[j] + off + 256 * b);
          uw[b][j] = load_stream16(upp[j] + off + 256 * b);
        }
  };
  load_batch(lane);  // in flight while the row is copied
  const uint4* xr = reinterpret_cast<const uint4*>(x + row * ldx);
  for (int64_t i = threadIdx.x; i < pieces; i += kWarps * 32) xs[i] = load_shared16(xr + i);
  __syncthreads();
#pragma unroll 1
  for (int64_t c0 = lane; c0 < pieces; c0 += 32 * kBatch) {
    if (c0 > lane) load_batch(c0);
#pragma unroll
    for (int b = 0; b < kBatch; ++b)
#pragma unroll
      for (int j = 0; j < kColsPerWarp; ++j)
        if (c0 + 32 * b < pieces && j < cols) {
          const uint4 xv = xs[c0 + 32 * b];
          g[j] = dot8(xv, gw[b][j], g[j]);
          u[j] = dot8(xv, uw[b][j], u[j]);
        }
  }
#pragma unroll
  for (int j = 0; j < kColsPerWarp; ++j) {
    const float gs = warp_sum(g[j]), us = warp_sum(u[j]);
    if (lane == 0 && col0 + j < I) act[static_cast<int64_t>(pair) * I + col0 + j] = __float2bfloat16_rn(swiglu(gs, us));
  }
}

// grid (ceil(H / kWarps), rows), dynamic shared memory moe_decode_down_smem_bytes: a warp per
// output column, kSlots >= the row's slots. Each lane issues its loads of every slot's down row at
// once, the first ones before the block copies the row's act rows into shared memory (all of a
// thread's copies in flight together), so a warp waits for memory about once per 32 pieces of K
// (H100, 35B-A3B batch 1: 23.7 us for 19 MB with two columns a warp and the slots' loads one after
// another; 18.9 us with the act rows copied one round trip after another).
template <int kSlots>
__global__ void __launch_bounds__(kWarps * 32)
    moe_decode_down_kernel(const bf16* act, MoeExperts ex, const int32_t* ids, const float* weights, float* y, int64_t ldy, bool accumulate) {
  extern __shared__ float4 smem_raw[];
  uint4* act_rows = reinterpret_cast<uint4*>(smem_raw);  // [slots][I / 8] pieces of the row's act rows
  chained_kernel_start();
  const int lane = threadIdx.x % 32;
  const int64_t row = blockIdx.y, H = ex.hidden, I = ex.inter;
  const int slots = ex.slots;
  const int64_t pieces = I / 8;
  const int64_t col = static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32;
  const int64_t wcol = col < H ? col : 0;  // a column past H reads column 0 and stores nothing
  int32_t expert[kSlots];
#pragma unroll
  for (int s = 0; s < kSlots; ++s) expert[s] = s < slots ? ids[row * slots + s] : 0;
  uint4 w[kSlots];
  auto load_weights = [&](int64_t c) {
#pragma unroll
    for (int s = 0; s < kSlots; ++s)
      if (s < slots && c < pieces) w[s] = load_stream16(ex.down + (static_cast<int64_t>(expert[s]) * H + wcol) * I + 8 * c);
  };
  load_weights(lane);  // in flight while the act rows are copied
  constexpr int kCopies = 8;
  const uint4* a = reinterpret_cast<const uint4*>(act + row * slots * I);
  const int64_t act_pieces = slots * pieces;
  for (int64_t i0 = 0; i0 < act_pieces; i0 += kCopies * kWarps * 32) {
    auto piece = [&](int j) { return i0 + j * kWarps * 32 + threadIdx.x; };
    uint4 v[kCopies];
#pragma unroll
    for (int j = 0; j < kCopies; ++j)
      if (piece(j) < act_pieces) v[j] = load_shared16(a + piece(j));
#pragma unroll
    for (int j = 0; j < kCopies; ++j)
      if (piece(j) < act_pieces) act_rows[piece(j)] = v[j];
  }
  __syncthreads();
  float part[kSlots] = {};
  for (int64_t c = lane; c < pieces; c += 32) {
    if (c > lane) load_weights(c);
#pragma unroll
    for (int s = 0; s < kSlots; ++s)
      if (s < slots) part[s] = dot8(act_rows[s * pieces + c], w[s], part[s]);
  }
  // The sum over slots in slot order, weighted by the routing weights.
  float sum = 0;
#pragma unroll
  for (int s = 0; s < kSlots; ++s) {
    if (s >= slots) break;
    sum = fmaf(weights[row * slots + s], warp_sum(part[s]), sum);
  }
  if (lane == 0 && col < H) {
    float* out = y + row * ldy + col;
    *out = accumulate ? *out + sum : sum;
  }
}

// Slots of the narrower down kernel (top-8 to top-11 with a shared expert; fewer registers).
constexpr int kDownFewSlots = 12;

std::size_t moe_decode_down_smem_bytes(const MoeExperts& ex) { return static_cast<std::size_t>(ex.slots * ex.inter) * sizeof(bf16); }

}  // namespace

std::size_t moe_decode_act_bytes(int64_t rows, const MoeExperts& ex) { return static_cast<std::size_t>(rows * ex.slots * ex.inter) * sizeof(bf16); }

void moe_decode(const bf16* x, int64_t ldx, int64_t rows, const MoeExperts& ex, const int32_t* ids, const float* weights, bf16* act, float* y,
                int64_t ldy, bool accumulate, cudaStream_t stream) {
  if (rows < 0 || rows > kMoeDecodeRows) fail("moe_decode: ", rows, " rows (at most ", kMoeDecodeRows, ")");
  if (ex.hidden % 8 != 0 || ex.inter % 8 != 0 || ldx % 8 != 0 || reinterpret_cast<uintptr_t>(x) % 16 != 0)
    fail("moe_decode: H, I and the row stride must be multiples of 8 with 16-byte aligned rows");
  if (ex.hidden * static_cast<int64_t>(sizeof(bf16)) > 48 * 1024) fail("moe_decode: a hidden size of ", ex.hidden, " (at most 24,576)");
  if (rows == 0) return;
  if (ex.packed) return moe_decode_packed(x, ldx, rows, ex, ids, weights, act, y, ldy, accumulate, stream);
  constexpr int per_block = kWarps * kColsPerWarp;
  const dim3 gu_grid(static_cast<unsigned>((ex.inter + per_block - 1) / per_block), static_cast<unsigned>(rows * ex.slots));
  const std::size_t gu_smem = static_cast<std::size_t>(ex.hidden) * sizeof(bf16);
  launch_chained(moe_decode_gate_up_kernel, gu_grid, dim3(kWarps * 32), gu_smem, stream, x, ldx, ex, ids, act);
  QWENRT_CUDA_CHECK_LAUNCH();
  const std::size_t down_smem = moe_decode_down_smem_bytes(ex);
  if (down_smem > kMoeDecodeDownMaxSmem) fail("moe_decode: ", ex.slots, " slots of ", ex.inter, " FFN columns need more shared memory than ", kMoeDecodeDownMaxSmem, " bytes");
  const auto down = ex.slots <= kDownFewSlots ? moe_decode_down_kernel<kDownFewSlots> : moe_decode_down_kernel<kMoeMaxSlots>;
  if (down_smem > 48 * 1024) {
    static const bool opted_in = [] {
      for (const auto kernel : {moe_decode_down_kernel<kDownFewSlots>, moe_decode_down_kernel<kMoeMaxSlots>})
        QWENRT_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kMoeDecodeDownMaxSmem)));
      return true;
    }();
    (void)opted_in;
  }
  const dim3 down_grid(static_cast<unsigned>((ex.hidden + kWarps - 1) / kWarps), static_cast<unsigned>(rows));
  launch_chained(down, down_grid, dim3(kWarps * 32), down_smem, stream, static_cast<const bf16*>(act), ex, ids, weights, y, ldy, accumulate);
  QWENRT_CUDA_CHECK_LAUNCH();
}

}  // namespace qwenrt::cuda

namespace qwenrt::cuda {

std::size_t moe_dequantized_bytes(const MoeExperts& ex) {
  const auto gu = static_cast<std::size_t>(ex.gate_up_packed.rows * ex.gate_up_packed.cols) * sizeof(bf16);
  return (gu + 15) / 16 * 16 + static_cast<std::size_t>(ex.down_packed.rows * ex.down_packed.cols) * sizeof(bf16);
}

MoeExperts moe_dequantize(const MoeExperts& packed, void* scratch, cudaStream_t stream) {
  if (!packed.packed) fail("internal: moe_dequantize of bf16 experts");
  MoeExperts ex = packed;
  ex.packed = false;
  bf16* gu = static_cast<bf16*>(scratch);
  bf16* down = reinterpret_cast<bf16*>(static_cast<std::byte*>(scratch) + (moe_dequantized_bytes(packed) -
                                                                           static_cast<std::size_t>(packed.down_packed.rows * packed.down_packed.cols) * sizeof(bf16)));
  dequantize_rows(packed.gate_up_packed, 0, packed.gate_up_packed.rows, gu, stream);
  dequantize_rows(packed.down_packed, 0, packed.down_packed.rows, down, stream);
  ex.gate_up = gu;
  ex.down = down;
  return ex;
}

}  // namespace qwenrt::cuda
