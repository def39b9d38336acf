// The grouped GEMMs of prompt windows on warpgroup products (moe_grouped_wgmma.h). A block is one
// 128 x 256 tile (128 places of one expert x 256 weight rows), its two warpgroups 64 places each,
// one m64n256k16 product per 16 of K reading both operands from shared memory (no per-warp
// fragment loads: the mma.sync kernel's ldmatrix traffic is what held it to ~200 TFLOP/s on an
// H100). Operands arrive by cp.async in the 128-byte-swizzle layout, 64 of K per stage, four
// stages; each stage's products are waited for before its buffer is refilled.
#include "backend/cuda/moe/moe_grouped_wgmma.h"

#include "backend/cuda/moe/grouped_tile.cuh"
#include "backend/cuda/ptx/mma.cuh"
#include "backend/cuda/ptx/wgmma.cuh"
#include "backend/cuda/runtime/chained_launch.h"
#include "backend/cuda/runtime/cuda_check.h"
#include "backend/cuda/runtime/runtime_options.h"
#include "backend/cuda/runtime/wgmma_probe.h"

namespace qwenrt::cuda {
namespace {

using bf16 = __nv_bfloat16;
constexpr int BM = kMoeWgmmaTileRows, BN = 256, BK = 64;  // BK: one 128-byte swizzled row of K a stage
constexpr int kThreads = 256;                             // two warpgroups of 64 places
constexpr int kStages = 4;
constexpr int kABytes = BM * BK * 2, kBBytes = BN * BK * 2, kStageBytes = kABytes + kBBytes;
constexpr int kSmemBytes = kStages * kStageBytes + 1024;  // 192 KB and room to align to 1024
constexpr int kAPieces = BM * (BK / 8) / kThreads, kBPieces = BN * (BK / 8) / kThreads;  // 16-byte copies per thread and stage
constexpr int kAcc = 64 * BN / 128;                                                      // a thread's share of its warpgroup's 64 x 256

// Tile `blockIdx.x` (places [tile·BM, +BM), one expert), weight rows of blockIdx.y. kGateUp: x rows
// gathered through `sorted`, K = H, weight rows 0-127 the gate rows of FFN columns n0.., 128-255
// their up rows, act = bf16(silu(g)·u) out; else act rows, K = I, down rows n0.., f32 out.
template <bool kGateUp>
__global__ void __launch_bounds__(kThreads, 1)
    moe_grouped_wgmma_kernel(const bf16* a, int64_t lda, const int32_t* sorted, const int32_t* tile_expert, MoeExperts ex, void* out) {
  extern __shared__ float4 smem_raw[];
  chained_kernel_start();
  const grouped_tile::Place place = grouped_tile::place_of<BM, BN, kGateUp>(tile_expert, ex);
  if (place.e < 0) return;
  const auto [e, H, I, K, N, n0, p0, w] = place;
  const uint32_t base = (static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw)) + 1023) & ~1023u;
  auto a_stage = [&](int s) { return base + static_cast<uint32_t>(s * kStageBytes); };
  auto b_stage = [&](int s) { return base + static_cast<uint32_t>(s * kStageBytes + kABytes); };

  // This thread's copies each stage: chunk tid % 8 (8 of K) of rows tid / 8 + 32 i.
  const int tid = threadIdx.x, chunk = tid % 8;
  const bf16* a_src[kAPieces];
  bool a_ok[kAPieces];
  uint32_t a_off[kAPieces];
#pragma unroll
  for (int i = 0; i < kAPieces; ++i) {
    const int row = tid / 8 + 32 * i;
    a_src[i] = grouped_tile::a_row<kGateUp>(place, a, lda, sorted, row, a_ok[i]);
    a_off[i] = wgmma_tile_offset(BM, row, chunk);
  }
  const bf16* b_src[kBPieces];
  bool b_ok[kBPieces];
  uint32_t b_off[kBPieces];
#pragma unroll
  for (int i = 0; i < kBPieces; ++i) {
    const int row = tid / 8 + 32 * i;
    b_ok[i] = grouped_tile::output_column<BN, kGateUp>(place, row) < N;
    b_src[i] = w + (b_ok[i] ? grouped_tile::weight_row<BN, kGateUp>(place, row) : 0) * K;
    b_off[i] = wgmma_tile_offset(BN, row, chunk);
  }
  const int64_t k_tiles = (K + BK - 1) / BK;
  auto load_stage = [&](int stage, int64_t kt) {
    const int64_t k = kt * BK + chunk * 8;
#pragma unroll
    for (int i = 0; i < kAPieces; ++i) {
      const bool ok = a_ok[i] && k < K;
      cp_async16(a_stage(stage) + a_off[i], a_src[i] + (ok ? k : 0), ok);
    }
#pragma unroll
    for (int i = 0; i < kBPieces; ++i) {
      const bool ok = b_ok[i] && k < K;
      cp_async16(b_stage(stage) + b_off[i], b_src[i] + (ok ? k : 0), ok);
    }
  };

#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < k_tiles) load_stage(s, s);
    cp_async_commit();
  }
  const int warp = tid / 32, group = warp / 4;
  float acc[kAcc] = {};
  for (int64_t kt = 0; kt < k_tiles; ++kt) {
    cp_async_wait<kStages - 2>();
    fence_proxy_async_shared();
    // Stage kt has landed for everyone, and both warpgroups' products of stage kt - 1 (waited for
    // below) are done with the buffer the next load takes.
    __syncthreads();
    {
      const int64_t next = kt + kStages - 1;
      if (next < k_tiles) load_stage(static_cast<int>(next % kStages), next);
      cp_async_commit();
    }
    const int st = static_cast<int>(kt % kStages);
    const uint32_t a_group = a_stage(st) + group * 64 * 128;
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < BK / 16; ++kk)
      wgmma_64x256_ss(acc, wgmma_desc(a_group + kk * 32, 16, 1024), wgmma_desc(b_stage(st) + kk * 32, 16, 1024), kt > 0 || kk > 0);
    wgmma_commit();
    wgmma_wait<0>();
    wgmma_hold(acc);
  }
  cp_async_wait<0>();

  // Thread (warp w of its group, lane (g, t)): places 16w + g (+8) of its group's 64, columns
  // 8j + 2t (+1) of the 256 weight rows.
  const int lane = tid % 32, g = lane / 4, t = lane % 4;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int64_t p = p0 + group * 64 + (warp % 4) * 16 + g + half * 8;
    if (kGateUp) {
#pragma unroll
      for (int j = 0; j < BN / 16; ++j) {  // gate block j, up block j + 16
        const int64_t c = n0 + 8 * j + 2 * t;
        if (c < N) grouped_tile::store_swiglu(place, out, p, c, &acc[4 * j + 2 * half], &acc[4 * (j + BN / 16) + 2 * half]);
      }
    } else {
      if (sorted[p] < 0) continue;
#pragma unroll
      for (int j = 0; j < BN / 8; ++j) {
        const int64_t c = n0 + 8 * j + 2 * t;
        if (c < N) grouped_tile::store_down(place, out, p, c, &acc[4 * j + 2 * half]);
      }
    }
  }
}

}  // namespace

bool moe_wgmma_enabled() { return wgmma_available() && runtime_options().moe_wgmma; }

void moe_grouped_gemms_wgmma(const bf16* x, int64_t ldx, int64_t tiles, const MoeExperts& ex, const int32_t* sorted, const int32_t* tile_expert,
                             bf16* act, float* out, cudaStream_t stream) {
  constexpr auto* gate_up = moe_grouped_wgmma_kernel<true>;
  constexpr auto* down = moe_grouped_wgmma_kernel<false>;
  static const bool opted_in = [&] {
    QWENRT_CUDA_CHECK(cudaFuncSetAttribute(gate_up, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
    QWENRT_CUDA_CHECK(cudaFuncSetAttribute(down, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
    return true;
  }();
  (void)opted_in;
  const dim3 gu_grid(static_cast<unsigned>(tiles), static_cast<unsigned>((ex.inter + BN / 2 - 1) / (BN / 2)));
  launch_chained(gate_up, gu_grid, dim3(kThreads), kSmemBytes, stream, x, ldx, sorted, tile_expert, ex, static_cast<void*>(act));
  QWENRT_CUDA_CHECK_LAUNCH();
  const dim3 down_grid(static_cast<unsigned>(tiles), static_cast<unsigned>((ex.hidden + BN - 1) / BN));
  launch_chained(down, down_grid, dim3(kThreads), kSmemBytes, stream, static_cast<const bf16*>(act), ex.inter, sorted, tile_expert, ex,
                 static_cast<void*>(out));
  QWENRT_CUDA_CHECK_LAUNCH();
}

}  // namespace qwenrt::cuda
