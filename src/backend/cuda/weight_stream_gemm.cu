#include "backend/cuda/weight_stream_gemm.h"

#include <algorithm>
#include <cstdlib>
#include <string>

#include "backend/cuda/chained_launch.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/gemm_tile_store.cuh"
#include "backend/cuda/mma.cuh"
#include "backend/cuda/row_norm.cuh"

namespace qwenrt::cuda {
namespace {

constexpr int kConsumerWarps = 8;
constexpr int kThreads = (kConsumerWarps + 1) * 32;  // the last warp issues the copies
constexpr int kTileRows = 16;                        // one m16 tile of weight rows
constexpr int kStageK = 1024;                        // k columns of a stage: 64 k-steps, eight per consumer warp
constexpr int kRowStride = kStageK * 2 + 16;         // padded: ldmatrix rows fall in different banks
constexpr int kStageBytes = kTileRows * kRowStride;
template <int kStages>
constexpr int smem_bytes() { return kStages * kStageBytes + 2 * kStages * 8; }
// Fewer tiles than this leave too few rings streaming (each keeps ~99 KB in flight; 128 of them
// ~13 MB, a few times what the H200's bandwidth-latency product asks); skinny_gemm's K split
// covers those.
constexpr int64_t kMinRingTiles = 128;

// Device helpers of the Hopper kernel body (empty for older architectures, which never run it).
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
constexpr int kStepsPerWarp = kStageK / 16 / kConsumerWarps;
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
// Which (tile, stage) steps block b streams: `rounds` whole tiles b, b + G, b + 2G, ... (G =
// gridDim.x; round robin), then the steps [q0, q1) of the tail tiles rounds·G onwards, counted
// tile-major from the tail's first step. A tail range may start or end inside a tile (split_tail):
// then each block covering it leaves its partial sums in the workspace and the last to finish adds
// them in block order. Where the splits fall depends on the shapes and G alone, so rows stay
// batch-invariant.
struct Schedule {
  int64_t stages_per_tile, rounds, tail_first_tile, tail_steps, q0, q1;
  int64_t block, blocks;

  __device__ Schedule(const WeightStreamJob& job, int64_t k) {
    stages_per_tile = (k + kStageK - 1) / kStageK;
    block = blockIdx.x;
    blocks = gridDim.x;
    rounds = job.tiles / blocks;
    tail_first_tile = rounds * blocks;
    tail_steps = (job.tiles - tail_first_tile) * stages_per_tile;
    if (job.split_tail) {
      q0 = range_begin(block);
      q1 = range_begin(block + 1);
    } else {
      const bool has = tail_first_tile + block < job.tiles;
      q0 = has ? block * stages_per_tile : 0;
      q1 = has ? q0 + stages_per_tile : 0;
    }
  }
  __device__ int64_t steps() const { return rounds * stages_per_tile + q1 - q0; }
  // Step i of this block: its tile and stage.
  __device__ void at(int64_t i, int64_t& tile, int64_t& stage) const {
    const int64_t whole = rounds * stages_per_tile;
    if (i < whole) {
      tile = block + (i / stages_per_tile) * blocks;
      stage = i % stages_per_tile;
    } else {
      const int64_t q = q0 + i - whole;
      tile = tail_first_tile + q / stages_per_tile;
      stage = q % stages_per_tile;
    }
  }
  // Split tails: where block b's range begins, and the block whose range holds tail step q.
  __device__ int64_t range_begin(int64_t b) const { return b * tail_steps / blocks; }
  __device__ int64_t block_of(int64_t q) const { return ((q + 1) * blocks + tail_steps - 1) / tail_steps - 1; }
};
#endif

// Each block streams its steps through a ring of kStages slots (step i fills slot i mod kStages).
// The copy warp waits for a slot to be released by all eight consumer warps, then copies the
// step's 16 row pieces into it (one bulk copy per row: 16 rows of one weight, or 8 gate and 8 up
// rows for SwiGLU pairs); consumer warp w multiplies k-steps kStepsPerWarp·w onwards of every stage
// (A from the ring with ldmatrix, B = x from global/L1, or RMSNorm(h)·w computed on the way with the
// rounding of the skinny kernel's normalise_rows) and, per tile (or piece of a split tile), the
// warps' sums are added in warp order.
// (Stages of 256 k, 16 copies of 512 bytes each, streamed at 30-50% of the copy bandwidth: the
// copies' count, not their bytes, was the limit.)
template <int kStages>
__global__ void __launch_bounds__(kThreads) weight_stream_kernel(const __nv_bfloat16* __restrict__ x, int n, int64_t k, int64_t ldx,
                                                                 const WeightStreamJob job) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  extern __shared__ __align__(128) unsigned char smem[];
  __shared__ float red[kConsumerWarps][4][32];
  __shared__ float square_sums[kConsumerWarps][kSkinnyGemmMaxNormedRows], scale[kSkinnyGemmMaxNormedRows];
  __shared__ int last_part;
  const uint32_t ring = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  const uint32_t full = ring + kStages * kStageBytes, empty = full + kStages * 8;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const bool pairs = job.up != nullptr, normed = job.norm.h != nullptr;
  const Schedule sched(job, k);
  const int64_t steps = sched.steps();
  // Tile t: its weight and first row (8 rows of gate and of up for pairs, else 16).
  auto segment_of = [&](int64_t tile) {
    int s = 0;
    while (s + 1 < job.count && tile >= job.first_tile[s + 1]) ++s;
    return s;
  };
  auto first_row = [&](int64_t tile, int s) { return (tile - job.first_tile[s]) * (pairs ? kTileRows / 2 : kTileRows); };

  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      mbar_init(full + 8 * s, 1);
      mbar_init(empty + 8 * s, kConsumerWarps);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();

  if (warp == kConsumerWarps) {
    // The weights never change: the copies start before the wait on the kernel ahead. Lane r
    // copies ring row r.
    for (int64_t i = 0; i < steps; ++i) {
      const int slot = static_cast<int>(i % kStages);
      const uint32_t use = static_cast<uint32_t>(i / kStages);
      if (use > 0) mbar_wait(empty + 8 * slot, (use - 1) & 1);
      int64_t tile, stage;
      sched.at(i, tile, stage);
      const int s = segment_of(tile);
      const GemmSegment& seg = job.seg[s];
      const int64_t k0 = stage * kStageK;
      const uint32_t piece = static_cast<uint32_t>(min(static_cast<int64_t>(kStageK), k - k0) * 2);
      const int64_t wrow = first_row(tile, s) + (pairs ? lane % 8 : lane);
      const bool copies = lane < kTileRows && wrow < seg.rows;
      const uint32_t copying = __popc(__ballot_sync(0xffffffffu, copies));
      if (lane == 0) mbar_arrive_expect_tx(full + 8 * slot, piece * copying);
      __syncwarp();
      const __nv_bfloat16* src = (pairs && lane >= 8 ? job.up : seg.w) + wrow * k + k0;
      if (copies) bulk_copy(ring + slot * kStageBytes + lane * kRowStride, src, piece, full + 8 * slot);
    }
    return;
  }

  grid_dependency_wait();  // x (or h) and y come from the kernels ahead
  grid_launch_dependents();
  const int g = lane / 4, t = lane % 4;
  const bool has_x = g < n;
  constexpr int kConsumers = kConsumerWarps * 32;
  if (normed) {
    // Each row's scale, summed as skinny_gemm's normalise_rows sums it (256 threads, warps in order).
    for (int r = 0; r < n; ++r) {
      const float ss = warp_square_sum<kConsumers>(job.norm.h + r * job.norm.ldh, k);
      if (lane == 0) square_sums[warp][r] = ss;
    }
    asm volatile("bar.sync 1, %0;" ::"n"(kConsumers) : "memory");
    if (threadIdx.x < n) {
      float total = 0;
#pragma unroll
      for (int w = 0; w < kConsumerWarps; ++w) total += square_sums[w][threadIdx.x];
      scale[threadIdx.x] = rsqrtf(total / static_cast<float>(k) + job.norm.eps);
    }
    asm volatile("bar.sync 1, %0;" ::"n"(kConsumers) : "memory");
  }
  const float row_scale = normed && has_x ? scale[g] : 0.0f;
  const __nv_bfloat16* xr = normed ? nullptr : x + (has_x ? g : 0) * ldx;
  const float* hr = normed ? job.norm.h + (has_x ? g : 0) * job.norm.ldh : nullptr;
  // x[g][col], x[g][col + 1] as a bf16 pair (zero past k or the rows).
  auto x_pair = [&](int64_t col) -> uint32_t {
    if (!has_x || col >= k) return 0u;
    if (!normed) return __ldg(reinterpret_cast<const uint32_t*>(xr + col));
    const float2 hv = *reinterpret_cast<const float2*>(hr + col), wv = __ldg(reinterpret_cast<const float2*>(job.norm.w + col));
    const __nv_bfloat162 v = __floats2bfloat162_rn(hv.x * row_scale * wv.x, hv.y * row_scale * wv.y);
    return *reinterpret_cast<const uint32_t*>(&v);
  };
  const int mi = lane / 8, mr = lane % 8;  // the ldmatrix matrix and row this lane addresses
  for (int64_t i = 0; i < steps;) {
    // One piece: this block's steps of one tile.
    int64_t tile, stage0;
    sched.at(i, tile, stage0);
    const int64_t piece_steps = min(sched.stages_per_tile - stage0, steps - i);
    const bool whole = stage0 == 0 && piece_steps == sched.stages_per_tile;
    float acc[4] = {};
    for (int64_t st = stage0; st < stage0 + piece_steps; ++st, ++i) {
      const int slot = static_cast<int>(i % kStages);
      const int64_t k0 = st * kStageK;
      // B fragments before the wait: they do not depend on the ring.
      uint32_t b[kStepsPerWarp][2];
#pragma unroll
      for (int j = 0; j < kStepsPerWarp; ++j) {
        const int64_t kk = k0 + 16 * (kStepsPerWarp * warp + j);
        b[j][0] = x_pair(kk + 2 * t);
        b[j][1] = x_pair(kk + 8 + 2 * t);
      }
      mbar_wait(full + 8 * slot, static_cast<uint32_t>(i / kStages) & 1);
#pragma unroll
      for (int j = 0; j < kStepsPerWarp; ++j) {
        const int64_t kk = k0 + 16 * (kStepsPerWarp * warp + j);
        if (kk >= k) continue;
        uint32_t a[4];
        // Matrices: rows 0-7 | 8-15 | 0-7 | 8-15 at columns 0-7 | 0-7 | 8-15 | 8-15 of the k-step.
        ldmatrix_x4(a, ring + slot * kStageBytes + ((mi % 2) * 8 + mr) * kRowStride + (32 * (kStepsPerWarp * warp + j) + 16 * (mi / 2)));
        if (kk + 8 >= k) a[2] = a[3] = 0u;  // the k-step's upper half is past k: stale ring bytes
        mma_bf16_16816(acc, a[0], a[1], a[2], a[3], b[j][0], b[j][1]);
      }
      __syncwarp();
      if (lane == 0) mbar_arrive(empty + 8 * slot);
    }
    // Sum over the consumer warps in warp order. acc[e]: ring row g (+8 for e >= 2: the up row of
    // a pair), activation row 2t + (e & 1).
#pragma unroll
    for (int e = 0; e < 4; ++e) red[warp][e][lane] = acc[e];
    asm volatile("bar.sync 1, %0;" ::"n"(kConsumers) : "memory");
    if (threadIdx.x < 32) {
      const int l = threadIdx.x;
      float v[4] = {};
#pragma unroll
      for (int e = 0; e < 4; ++e)
#pragma unroll
        for (int ww = 0; ww < kConsumerWarps; ++ww) v[e] += red[ww][e][l];
      bool write = true;
      if (!whole) {
        // A piece of a split tail tile: slot 0 of this block holds its first tail tile's piece,
        // slot 1 its last. The last block of the tile to finish adds the pieces in block order.
        const int64_t tile_q = (tile - sched.tail_first_tile) * sched.stages_per_tile;
        const int64_t b_first = sched.block_of(tile_q), b_last = sched.block_of(tile_q + sched.stages_per_tile - 1);
        auto slot_of = [&](int64_t b) {
          const int64_t first_of_b = sched.tail_first_tile + sched.range_begin(b) / sched.stages_per_tile;
          return job.partial + ((b * 2 + (tile == first_of_b ? 0 : 1)) * 4) * 32;
        };
        float* mine = slot_of(sched.block);
#pragma unroll
        for (int e = 0; e < 4; ++e) mine[e * 32 + l] = v[e];
        __syncwarp();  // orders the warp's sums before lane 0's release (counter_add_acq_rel)
        // Counted in steps, so blocks with empty ranges (fewer tail steps than blocks) do not matter.
        if (l == 0) {
          const uint32_t before = counter_add_acq_rel(&job.counters[b_first], static_cast<uint32_t>(piece_steps));
          last_part = before + piece_steps == static_cast<uint64_t>(sched.stages_per_tile);
        }
        __syncwarp();
        write = last_part != 0;
        if (write) {
#pragma unroll
          for (int e = 0; e < 4; ++e) v[e] = 0;
          for (int64_t b = b_first; b <= b_last; ++b) {
            if (sched.range_begin(b) == sched.range_begin(b + 1)) continue;  // an empty range
            const float* part = slot_of(b);
#pragma unroll
            for (int e = 0; e < 4; ++e) v[e] += __ldcg(part + e * 32 + l);
          }
          if (l == 0) job.counters[b_first] = 0;  // ready for the next launch
        }
      }
      if (write) {
        const int s = segment_of(tile);
        const GemmSegment& seg = job.seg[s];
        store_tile_sums(seg, pairs, job.act, job.ld_act, first_row(tile, s) + l / 4, 2 * (l % 4), n, v);
      }
    }
    asm volatile("bar.sync 1, %0;" ::"n"(kConsumers) : "memory");
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

// One ring kernel per stage count, its shared-memory limit raised once.
template <int kStages>
void launch_ring(int blocks, cudaStream_t stream, const __nv_bfloat16* x, int64_t n, int64_t k, int64_t ldx, const WeightStreamJob& job) {
  static const cudaError_t raised =
      cudaFuncSetAttribute(weight_stream_kernel<kStages>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes<kStages>());
  QWENRT_CUDA_CHECK(raised);
  launch_chained(weight_stream_kernel<kStages>, dim3(blocks), dim3(kThreads), smem_bytes<kStages>(), stream, x, static_cast<int>(n), k, ldx,
                 job);
}

}  // namespace

bool weight_stream_suits(int64_t tiles, bool plain) {
  // Off unless asked for: measured on the H200 (bench/results/2026-12-03-0840-h200.md), every way
  // of using it inside decode steps was slower. Normalised launches ran 2.4x slower (their f32 rows
  // and norm weights no longer stay in the L1 left beside two rings), and even plain launches where
  // it streams faster in isolation (9B out_proj, down) cost the whole 9B step 11%: the kernels
  // around them lose L1 to the ring's shared memory. Read on every call: calls happen when a step is
  // enqueued or captured, not when a graph replays.
  const char* v = std::getenv("QWENRT_CUDA_RING");
  const std::string use = v ? v : "0";
  if (use != "plain" && use != "all") return false;
  const StreamDevice d = current_device();
  if (d.major != 9 || tiles < kMinRingTiles) return false;
  if (use == "all") return true;  // every launch kind of 128+ tiles
  return plain && tiles <= 2 * static_cast<int64_t>(d.multiprocessors);
}

void weight_stream_run(const __nv_bfloat16* x, int64_t n, int64_t k, int64_t ldx, const WeightStreamJob& job, cudaStream_t stream,
                       const WeightStreamConfig& config) {
  if (n < 1 || n > 8) fail("weight_stream_gemm: ", n, " activation rows; it takes 1 to 8");
  if (k < 8 || k % 8 != 0) fail("weight_stream_gemm: k ", k, " must be a multiple of 8");
  if (job.norm.h) {
    if (k > kSkinnyGemmMaxNormedK || job.norm.ldh < k || job.norm.ldh % 4 != 0 || !job.norm.w ||
        reinterpret_cast<uintptr_t>(job.norm.h) % 16 != 0 || reinterpret_cast<uintptr_t>(job.norm.w) % 16 != 0)
      fail("weight_stream_gemm: normalised rows need 16-byte aligned h and w, a stride of at least k in multiples of 4, k <= ",
           kSkinnyGemmMaxNormedK);
  } else if (ldx < k || ldx % 8 != 0 || reinterpret_cast<uintptr_t>(x) % 16 != 0) {
    fail("weight_stream_gemm: x needs 16-byte alignment and a stride ldx ", ldx, " >= k in multiples of 8");
  }
  if (job.count < 1 || job.count > kSkinnyGemmMaxSegments || job.tiles < 1 || job.tiles != job.first_tile[job.count])
    fail("weight_stream_gemm: ", job.count, " weights over ", job.tiles, " tiles is not a job");
  for (int i = 0; i < job.count; ++i)
    if (reinterpret_cast<uintptr_t>(job.seg[i].w) % 16 != 0 || (job.up && reinterpret_cast<uintptr_t>(job.up) % 16 != 0))
      fail("weight_stream_gemm: weights must be 16-byte aligned");
  const StreamDevice d = current_device();
  if (d.major != 9) fail("weight_stream_gemm: needs a compute capability 9.x GPU (bulk copies), this one is ", d.major, ".x");
  const int fit = config.stages <= 3 ? 2 : 1;
  if (config.blocks_per_sm < 0 || config.blocks_per_sm > fit)
    fail("weight_stream_gemm: ", config.blocks_per_sm, " blocks per multiprocessor of ", config.stages, " stages; at most ", fit, " fit");
  const int blocks_per_sm = config.blocks_per_sm == 0 ? fit : config.blocks_per_sm;
  const int64_t max_blocks = static_cast<int64_t>(d.multiprocessors) * blocks_per_sm;
  if (max_blocks > kWeightStreamMaxBlocks) fail("weight_stream_gemm: ", max_blocks, " blocks; at most ", kWeightStreamMaxBlocks, " have counters");
  WeightStreamJob launch_job = job;
  launch_job.split_tail = config.split_tail;
  if (launch_job.split_tail && (!job.partial || !job.counters)) fail("weight_stream_gemm: a split tail needs the workspace and the counters");
  const int blocks = static_cast<int>(std::min<int64_t>(job.tiles, max_blocks));
  switch (config.stages) {
    case 3: launch_ring<3>(blocks, stream, x, n, k, ldx, launch_job); break;
    case 4: launch_ring<4>(blocks, stream, x, n, k, ldx, launch_job); break;
    case 6: launch_ring<6>(blocks, stream, x, n, k, ldx, launch_job); break;
    default: fail("weight_stream_gemm: ", config.stages, " stages is not built (3, 4 or 6)");
  }
  QWENRT_CUDA_CHECK_LAUNCH();
}

void weight_stream_gemm(const __nv_bfloat16* x, int64_t n, int64_t k, int64_t ldx, const __nv_bfloat16* w, int64_t rows, float* y,
                        int64_t ldy, bool accumulate, cudaStream_t stream, const SkinnyGemmWorkspace& workspace,
                        const WeightStreamConfig& config) {
  if (rows < 1 || ldy < rows || !y) fail("weight_stream_gemm: ", rows, " rows with ldy ", ldy);
  WeightStreamJob job{};
  job.seg[0] = {w, rows, y, ldy, accumulate};
  job.count = 1;
  job.tiles = static_cast<int>(tiles_of(rows));
  job.first_tile[1] = job.tiles;
  if (workspace.partial && workspace.partial_bytes >= kWeightStreamWorkspaceBytes) job.partial = static_cast<float*>(workspace.partial);
  job.counters = workspace.counters;
  weight_stream_run(x, n, k, ldx, job, stream, config);
}

}  // namespace qwenrt::cuda
