#include "backend/cuda/weight_stream_gemm.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>

#include "backend/cuda/chained_launch.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_device.h"
#include "backend/cuda/mma.cuh"

namespace qwenrt::cuda {
namespace {

constexpr int kConsumerWarps = 8;
constexpr int kThreads = (kConsumerWarps + 1) * 32;  // the last warp issues the copies
constexpr int kTileRows = 16;                        // one m16 tile of weight rows
constexpr int kStageK = 1024;                        // k columns of a stage: 64 k-steps, eight per consumer warp
constexpr int kStepsPerWarp = kStageK / 16 / kConsumerWarps;
constexpr int kRowStride = kStageK * 2 + 16;         // padded: ldmatrix rows fall in different banks
constexpr int kStageBytes = kTileRows * kRowStride;
constexpr int kStages = 3;                           // ~99 KB: two rings (this launch and the next) fit one SM
constexpr int kSmemBytes = kStages * kStageBytes + 2 * kStages * 8;
constexpr int kDispatchBlocksPerSm = 2;  // what skinny_gemm launches it with (measured faster than 1)

__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar) { asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory"); }
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
  uint32_t done = 0;
  while (!done)
    asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}"
                 : "=r"(done)
                 : "r"(bar), "r"(parity)
                 : "memory");
}
__device__ __forceinline__ void bulk_copy(uint32_t dst, const void* src, uint32_t bytes, uint32_t bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(dst), "l"(src), "r"(bytes),
               "r"(bar)
               : "memory");
}
// Block b takes row tiles b, b + G, b + 2G, ...; each tile is ceil(k / kStageK) stages, step i of
// the block fills ring slot i mod kStages. The copy warp waits for a slot to be released by all
// eight consumer warps, then copies the tile's 16 row pieces into it (one bulk copy per row);
// consumer warp w multiplies k-steps kStepsPerWarp·w onwards of every stage (A from the ring with
// ldmatrix, B = x from global/L1) and, per tile, the warps' sums are added in warp order.
// (Stages of 256 k, 16 copies of 512 bytes each, streamed at 30-50% of the copy bandwidth: the
// copies' count, not their bytes, was the limit.)
__global__ void __launch_bounds__(kThreads) weight_stream_kernel(const __nv_bfloat16* __restrict__ x, int n, int64_t k, int64_t ldx,
                                                                 const __nv_bfloat16* __restrict__ w, int64_t rows, float* y, int64_t ldy,
                                                                 bool accumulate) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  extern __shared__ __align__(128) unsigned char smem[];
  __shared__ float red[kConsumerWarps][4][32];
  const uint32_t ring = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  const uint32_t full = ring + kStages * kStageBytes, empty = full + kStages * 8;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t tiles = (rows + kTileRows - 1) / kTileRows;
  const int stages_per_tile = static_cast<int>((k + kStageK - 1) / kStageK);
  const int64_t my_tiles = blockIdx.x < tiles ? (tiles - blockIdx.x + gridDim.x - 1) / gridDim.x : 0;
  const int64_t steps = my_tiles * stages_per_tile;

  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      mbar_init(full + 8 * s, 1);
      mbar_init(empty + 8 * s, kConsumerWarps);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();

  if (warp == kConsumerWarps) {
    // The weights never change: the copies start before the wait on the kernel ahead.
    for (int64_t i = 0; i < steps; ++i) {
      const int slot = static_cast<int>(i % kStages);
      const uint32_t use = static_cast<uint32_t>(i / kStages);
      if (use > 0) mbar_wait(empty + 8 * slot, (use - 1) & 1);
      const int64_t tile = blockIdx.x + (i / stages_per_tile) * gridDim.x;
      const int64_t k0 = (i % stages_per_tile) * kStageK;
      const uint32_t piece = static_cast<uint32_t>(min(static_cast<int64_t>(kStageK), k - k0) * 2);
      const int tile_rows = static_cast<int>(min(static_cast<int64_t>(kTileRows), rows - tile * kTileRows));
      if (lane == 0) mbar_arrive_expect_tx(full + 8 * slot, piece * tile_rows);
      __syncwarp();
      if (lane < tile_rows)
        bulk_copy(ring + slot * kStageBytes + lane * kRowStride, w + (tile * kTileRows + lane) * k + k0, piece, full + 8 * slot);
    }
    return;
  }

  grid_dependency_wait();  // x and y come from the kernels ahead
  grid_launch_dependents();
  const int g = lane / 4, t = lane % 4;
  const bool has_x = g < n;
  const __nv_bfloat16* xr = x + (has_x ? g : 0) * ldx;
  const int mi = lane / 8, mr = lane % 8;  // the ldmatrix matrix and row this lane addresses
  for (int64_t local = 0; local < my_tiles; ++local) {
    const int64_t tile = blockIdx.x + local * gridDim.x;
    float acc[4] = {};
    for (int st = 0; st < stages_per_tile; ++st) {
      const int64_t i = local * stages_per_tile + st;
      const int slot = static_cast<int>(i % kStages);
      const int64_t k0 = static_cast<int64_t>(st) * kStageK;
      // B fragments before the wait: they do not depend on the ring.
      uint32_t b[kStepsPerWarp][2];
      bool in_k[kStepsPerWarp];
#pragma unroll
      for (int j = 0; j < kStepsPerWarp; ++j) {
        const int64_t kk = k0 + 16 * (kStepsPerWarp * warp + j);
        in_k[j] = kk < k;
        const bool lo = has_x && kk + 2 * t < k, hi = has_x && kk + 8 + 2 * t < k;
        b[j][0] = lo ? __ldg(reinterpret_cast<const uint32_t*>(xr + kk + 2 * t)) : 0u;
        b[j][1] = hi ? __ldg(reinterpret_cast<const uint32_t*>(xr + kk + 8 + 2 * t)) : 0u;
      }
      mbar_wait(full + 8 * slot, static_cast<uint32_t>(i / kStages) & 1);
#pragma unroll
      for (int j = 0; j < kStepsPerWarp; ++j) {
        if (!in_k[j]) continue;
        const int64_t kk = k0 + 16 * (kStepsPerWarp * warp + j);
        uint32_t a[4];
        // Matrices: rows 0-7 | 8-15 | 0-7 | 8-15 at columns 0-7 | 0-7 | 8-15 | 8-15 of the k-step.
        ldmatrix_x4(a, ring + slot * kStageBytes + ((mi % 2) * 8 + mr) * kRowStride + (32 * (kStepsPerWarp * warp + j) + 16 * (mi / 2)));
        if (kk + 8 >= k) a[2] = a[3] = 0u;  // the k-step's upper half is past k: stale ring bytes
        mma_bf16_16816(acc, a[0], a[1], a[2], a[3], b[j][0], b[j][1]);
      }
      __syncwarp();
      if (lane == 0) mbar_arrive(empty + 8 * slot);
    }
    // Sum over the consumer warps in warp order; d[e]: weight row g (+8 for e >= 2), activation
    // row 2t + (e & 1).
#pragma unroll
    for (int e = 0; e < 4; ++e) red[warp][e][lane] = acc[e];
    asm volatile("bar.sync 1, %0;" ::"n"(kConsumerWarps * 32) : "memory");
    if (threadIdx.x < 128) {
      const int e = threadIdx.x / 32, l = threadIdx.x % 32;
      float v = 0;
#pragma unroll
      for (int ww = 0; ww < kConsumerWarps; ++ww) v += red[ww][e][l];
      const int64_t row = tile * kTileRows + l / 4 + (e >= 2 ? 8 : 0);
      const int col = 2 * (l % 4) + (e & 1);
      if (row < rows && col < n) {
        float* dst = y + col * ldy + row;
        *dst = accumulate ? *dst + v : v;
      }
    }
    asm volatile("bar.sync 1, %0;" ::"n"(kConsumerWarps * 32) : "memory");
  }
#endif
}

}  // namespace

namespace {

// Compute capability major and multiprocessors of the current device, looked up once per thread
// and device.
struct StreamDevice {
  int major = 0, multiprocessors = 0;
};
StreamDevice current_device() {
  thread_local int cached = -1;
  thread_local StreamDevice info;
  int device = 0;
  QWENRT_CUDA_CHECK(cudaGetDevice(&device));
  if (device != cached) {
    QWENRT_CUDA_CHECK(cudaDeviceGetAttribute(&info.major, cudaDevAttrComputeCapabilityMajor, device));
    QWENRT_CUDA_CHECK(cudaDeviceGetAttribute(&info.multiprocessors, cudaDevAttrMultiProcessorCount, device));
    cached = device;
  }
  return info;
}

int64_t tiles_of(int64_t rows) { return (rows + kTileRows - 1) / kTileRows; }

}  // namespace

bool weight_stream_suits(int64_t rows) {
  // Off unless QWENRT_CUDA_RING=1 until it has been measured inside decode steps (its isolated
  // numbers are in bench/results/2026-12-03-0600-h200.md). Read on every call: calls happen when a
  // step is enqueued or captured, not when a graph replays.
  const char* v = std::getenv("QWENRT_CUDA_RING");
  if (!(v && std::string(v) == "1")) return false;
  const StreamDevice d = current_device();
  if (d.major != 9) return false;
  const double blocks = static_cast<double>(kDispatchBlocksPerSm) * d.multiprocessors;
  const double per_block = static_cast<double>(tiles_of(rows)) / blocks;
  if (per_block <= 1.0) return per_block >= 0.9;                // one tile each, hardly a block idle
  return std::ceil(per_block) / per_block <= 1.1;                 // the busiest block at most 10% over the mean
}

void weight_stream_gemm(const __nv_bfloat16* x, int64_t n, int64_t k, int64_t ldx, const __nv_bfloat16* w, int64_t rows, float* y,
                        int64_t ldy, bool accumulate, cudaStream_t stream, int blocks_per_sm) {
  if (n < 1 || n > 8) fail("weight_stream_gemm: ", n, " activation rows; it takes 1 to 8");
  if (k < 8 || k % 8 != 0 || ldx < k || ldx % 8 != 0) fail("weight_stream_gemm: k ", k, " and ldx ", ldx, " must be multiples of 8 with ldx >= k");
  if (rows < 1 || ldy < rows || !y) fail("weight_stream_gemm: ", rows, " rows with ldy ", ldy);
  if (reinterpret_cast<uintptr_t>(x) % 16 != 0 || reinterpret_cast<uintptr_t>(w) % 16 != 0)
    fail("weight_stream_gemm: x and w must be 16-byte aligned");
  const StreamDevice d = current_device();
  if (d.major != 9) fail("weight_stream_gemm: needs a compute capability 9.x GPU (bulk copies), this one is ", d.major, ".x");
  static const cudaError_t raised = cudaFuncSetAttribute(weight_stream_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes);
  QWENRT_CUDA_CHECK(raised);
  const int blocks = static_cast<int>(std::min<int64_t>(tiles_of(rows), static_cast<int64_t>(d.multiprocessors) * std::max(1, blocks_per_sm)));
  launch_chained(weight_stream_kernel, dim3(blocks), dim3(kThreads), kSmemBytes, stream, x, static_cast<int>(n), k, ldx, w, rows, y, ldy,
                 accumulate);
  QWENRT_CUDA_CHECK_LAUNCH();
}

}  // namespace qwenrt::cuda
