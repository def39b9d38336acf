// Decode-shaped products y = x · Wᵀ for 1..64 rows streaming bf16 weights into tensor cores, with
// the K split, the fused RMSNorm and SwiGLU variants (skinny_gemm.h).
#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "backend/cuda/gemm/gemm_tile_store.cuh"
#include "backend/cuda/gemm/skinny_gemm.h"
#include "backend/cuda/ptx/mma.cuh"
#include "backend/cuda/ptx/row_norm.cuh"
#include "backend/cuda/runtime/chained_launch.h"
#include "backend/cuda/runtime/cuda_check.h"
#include "backend/cuda/runtime/runtime_options.h"

namespace qwenrt::cuda {
namespace {

constexpr int kWarps = 8;  // warps of a block split K between them
constexpr int kThreads = kWarps * 32;
constexpr int kTileRows = 16;  // weight rows per block: one m16 tile (8 gate + 8 up rows for SwiGLU)
constexpr int kChunk = 32;     // K elements one warp consumes per step (4 lanes × 8)

struct Segments {
  GemmSegment seg[kSkinnyGemmMaxSegments];
  int first_tile[kSkinnyGemmMaxSegments + 1];  // first row tile of each segment
  int count;
  int splits;            // K ranges, one per blockIdx.y; > 1 for weights too small to fill the GPU
  int64_t split_chunks;  // K chunks per range
  float* partial;        // [tiles, splits, NT·4·32] when splits > 1
  uint32_t* counters;    // [tiles] ranges finished, when splits > 1
  // Prefetch each block's weights past its first group into L2 before the wait (run()).
  bool prefetch_l2;
  // SwiGLU pairs (count 1): seg[0].w holds the gate rows, `up` the up rows; a tile is 8 rows of each.
  const __nv_bfloat16* up;
  __nv_bfloat16* act;
  int64_t ld_act;
  SkinnyNormedRows norm;  // the activations, when the launch normalises them itself
};

// Columns [k0, k1) of rows [0, n) of RMSNorm(h) · w into xs (row stride ld_xs) in bf16, with the
// rounding of cuda::rms_norm_rows. Every block sums the squares of the whole rows in the same fixed
// order, so all blocks agree on the scale. With `store`, into nr.out too.
__device__ __forceinline__ void normalise_rows(const SkinnyNormedRows& nr, int n, int64_t k, int64_t k0, int64_t k1, __nv_bfloat16* xs,
                                               int64_t ld_xs, bool store) {
  __shared__ float square_sums[kWarps][kSkinnyGemmMaxNormedRows], scale[kSkinnyGemmMaxNormedRows];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int r = 0; r < n; ++r) {
    const float ss = warp_square_sum<kThreads>(nr.h + r * nr.ldh, k);
    if (lane == 0) square_sums[warp][r] = ss;
  }
  __syncthreads();
  if (threadIdx.x < n) {
    scale[threadIdx.x] = rms_scale<kWarps>(&square_sums[0][threadIdx.x], kSkinnyGemmMaxNormedRows, k, nr.eps);
    if (!(scale[threadIdx.x] > 0.0f)) report_non_finite(nr.probe, threadIdx.x);  // 0 for an infinite sum, NaN for NaN
  }
  __syncthreads();
  for (int r = 0; r < n; ++r) {
    const float* hr = nr.h + r * nr.ldh;
#pragma unroll 4
    for (int64_t i = k0 + 4 * threadIdx.x; i < k1; i += 4 * kThreads) {
      const uint2 v = normalise4_bf16(*reinterpret_cast<const float4*>(hr + i), __ldg(reinterpret_cast<const float4*>(nr.w + i)), scale[r]);
      *reinterpret_cast<uint2*>(xs + r * ld_xs + (i - k0)) = v;
      if (store) *reinterpret_cast<uint2*>(nr.out + r * nr.ld_out + i) = v;
    }
  }
  __syncthreads();
}

// Block (tile, s) owns one row tile of one segment and K range s; warp w takes the range's K
// chunks w, w+8, w+16, ... Lane (g, t) takes 8 consecutive k of weight rows g and g+8 (gate row g
// and up row g for SwiGLU) and of activation rows g + 8j: the dot product is order-free in k, so
// these 16-byte pieces feed two m16n8k16 products directly once A and B agree on the same
// permutation of k (no shuffles).
//
// Each warp works in groups of U steps and issues the next group's weight loads before it
// multiplies the current one, so 2U to U steps stay in flight and its stream does not drain
// between groups. The first group is loaded before the kernel waits on the one ahead of it
// (weights never change): those loads overlap that kernel's tail. (A cp.async ring of 4-8 steps
// per warp in shared memory measured slower on the H200: 27B decode 49 tok/s against 63; a
// ring of U register slots each refilled right after its product, slower than groups: 9B gate/up
// 80-86% of copy against 92%; blocks taking several tiles in turn, statically or from a counter,
// no faster than the hardware's own block scheduling, except where each block normalises its
// rows first: kPersistent.)
//
// With kNorm the activations are RMSNorm(h) · w of f32 rows h, which each block writes for its K
// range to shared memory after the wait (normalise_rows).
//
// Deeper groups keep more bytes in flight but need registers, and registers decide how many blocks
// stay resident: for one n-tile, U = 2 takes 64 registers (4 blocks per multiprocessor), U = 3
// 80 (3 blocks), U = 4 118 (2 blocks). A launch runs the deepest groups that still hold all its
// blocks at once (launch()); the sums are the same bit for bit at any depth.
template <int NT, int U>
constexpr int min_blocks_per_sm() {
  return NT == 1 ? (U <= 2 ? 4 : U == 3 ? 3 : 2) : NT == 2 ? 3 : 2;
}

template <int NT>
constexpr int default_group_steps() {
  return NT <= 2 ? 2 : 1;
}

// kPersistent (one K range only): block b takes tiles b, b + gridDim.x, ... in turn, normalising
// the rows once; the next tile's first group is loaded as soon as this one's sums are stored.
// NT: n-tiles of 8 activation rows; kNorm: activations normalised here; U: steps per group.
template <int NT, bool kNorm, int U, bool kPersistent = false>
__global__ void __launch_bounds__(kThreads, min_blocks_per_sm<NT, U>())
    skinny_gemm_kernel(const __nv_bfloat16* __restrict__ x, int n, int64_t k, int64_t ldx, Segments segs) {
  __shared__ float red[kWarps * NT * 4 * 32];  // the warps' partial sums: [warp][j][e][lane]
  __shared__ bool last_range;
  extern __shared__ uint4 normed_raw[];  // kNorm: [n][split_chunks · kChunk] bf16

  const bool pairs = segs.up != nullptr;
  const int tiles = segs.first_tile[segs.count];
  int tile = blockIdx.x;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int total_chunks = static_cast<int>((k + kChunk - 1) / kChunk);
  const int start = static_cast<int>(blockIdx.y * segs.split_chunks);
  const int end = min(total_chunks, static_cast<int>((blockIdx.y + 1) * segs.split_chunks));
  // The warp's i-th step is chunk first + 8i: warps interleave, so a block's warps read
  // neighbouring 64-byte pieces of each row together. (Each warp taking 4 consecutive chunks
  // measured 20% slower.)
  const int first = start + warp;
  constexpr int64_t kStride = kWarps * kChunk;  // elements between a warp's steps
  // Steps of this lane inside the range and inside k (its 8 k of chunk c are c·32 + 8t ...).
  const int lane_end = min(end, static_cast<int>((k - 8 * t + kChunk - 1) / kChunk));
  const int lane_steps = max(0, (lane_end - first + kWarps - 1) / kWarps);
  // The tile's segment, first row and this lane's two weight rows. Rows past the weight read row 0
  // instead: each only feeds its own output row, never stored.
  int s;
  int64_t row0;
  const __nv_bfloat16 *wg, *wh;
  auto locate = [&] {
    s = 0;
    while (s + 1 < segs.count && tile >= segs.first_tile[s + 1]) ++s;
    const GemmSegment& seg = segs.seg[s];
    row0 = static_cast<int64_t>(tile - segs.first_tile[s]) * (pairs ? kTileRows / 2 : kTileRows);
    const int64_t rg = row0 + g, rh = pairs ? rg : rg + 8;
    wg = seg.w + (rg < seg.rows ? rg : 0) * k + static_cast<int64_t>(first) * kChunk + 8 * t;
    wh = (pairs ? segs.up : seg.w) + (rh < seg.rows ? rh : 0) * k + static_cast<int64_t>(first) * kChunk + 8 * t;
  };
  locate();

  uint4 next_g[U], next_h[U];
  auto load_group = [&](int i0) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const bool in_k = i0 + u < lane_steps;
      next_g[u] = in_k ? load_stream16(wg + (i0 + u) * kStride) : make_uint4(0, 0, 0, 0);
      next_h[u] = in_k ? load_stream16(wh + (i0 + u) * kStride) : make_uint4(0, 0, 0, 0);
    }
  };
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if constexpr (!kNorm && !kPersistent) {
    // The rest of the tile's K range (past the first group) into L2 while the kernel ahead runs:
    // the launches this is asked for follow kernels that stream little (the DeltaNet step, the
    // attention merge), so the weights come in while memory would otherwise idle. Lanes (g, 0) of
    // warp 0 each prefetch their two rows (a row past the weight is row 0 again: harmless).
    // Bytes past the first group: the same for every K range but the last, which ends at k (run()
    // asks for the prefetch only where every range but the last is whole).
    const int64_t past = static_cast<int64_t>(segs.split_chunks) * kChunk - int64_t{U} * kStride;
    const int64_t bytes = 2 * (blockIdx.y + 1 < segs.splits ? past : past - (static_cast<int64_t>(segs.splits) * segs.split_chunks * kChunk - k));
    if (segs.prefetch_l2 && warp == 0 && t == 0 && bytes > 0) {
      asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(wg + U * kStride), "r"(static_cast<uint32_t>(bytes)) : "memory");
      asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(wh + U * kStride), "r"(static_cast<uint32_t>(bytes)) : "memory");
    }
  }
#endif
  load_group(0);
  const int64_t k0 = static_cast<int64_t>(start) * kChunk, k1 = min(static_cast<int64_t>(end) * kChunk, k);  // the block's k range
  if constexpr (kNorm) {
    // The norm weight never changes: into L1 before the wait, so normalising after it waits on the
    // rows alone.
    for (int64_t i = k0 + 4 * threadIdx.x; i < k1; i += 4 * kThreads) asm volatile("prefetch.global.L1 [%0];" ::"l"(segs.norm.w + i));
  }
  chained_kernel_start();
  if constexpr (kNorm) {
    // x becomes this block's K range of the normalised rows, in shared memory.
    __nv_bfloat16* xs = reinterpret_cast<__nv_bfloat16*>(normed_raw);
    const int64_t ld_xs = segs.split_chunks * kChunk;
    // The first row tile's blocks (one per K range) store the rows where asked: every column once.
    normalise_rows(segs.norm, n, k, k0, k1, xs, ld_xs, segs.norm.out != nullptr && blockIdx.x == 0);
    x = xs - k0;  // x[r · ldx + kk] for kk in the range
    ldx = ld_xs;
  }
  // This lane's activation row g at its first step; n-tile j is 8j rows further.
  const __nv_bfloat16* xp = x + g * ldx + static_cast<int64_t>(first) * kChunk + 8 * t;

  // Groups: the same count for every warp (steps past the range load and multiply zeros).
  const int warp_steps = (end - start + kWarps - 1) / kWarps;
  for (;;) {
    float acc[NT][4] = {};
    for (int i0 = 0; i0 < warp_steps; i0 += U) {
      uint4 a_g[U], a_h[U], b[U][NT];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        a_g[u] = next_g[u];
        a_h[u] = next_h[u];
        const bool in_k = i0 + u < lane_steps;
#pragma unroll
        for (int j = 0; j < NT; ++j) {
          const __nv_bfloat16* xj = xp + (i0 + u) * kStride + 8 * j * ldx;
          b[u][j] = !(in_k && 8 * j + g < n) ? make_uint4(0, 0, 0, 0) : kNorm ? *reinterpret_cast<const uint4*>(xj) : load_shared16(xj);
        }
      }
      if (i0 + U < warp_steps) load_group(i0 + U);  // in flight while these are multiplied
#pragma unroll
      for (int u = 0; u < U; ++u)
#pragma unroll
        for (int j = 0; j < NT; ++j) {
          mma_bf16_16816(acc[j], a_g[u].x, a_h[u].x, a_g[u].y, a_h[u].y, b[u][j].x, b[u][j].y);
          mma_bf16_16816(acc[j], a_g[u].z, a_h[u].z, a_g[u].w, a_h[u].w, b[u][j].z, b[u][j].w);
        }
    }

#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) red[((warp * NT + j) * 4 + e) * 32 + lane] = acc[j][e];
    __syncthreads();

    // Thread (j, l) finishes lane l's four outputs of n-tile j: the warps' sums in warp order.
    const int item = threadIdx.x, j = item / 32, l = item % 32;
    const bool active = item < NT * 32;
    float v[4] = {};
    if (active)
#pragma unroll
      for (int e = 0; e < 4; ++e)
#pragma unroll
        for (int w = 0; w < kWarps; ++w) v[e] += red[((w * NT + j) * 4 + e) * 32 + l];

    if (segs.splits > 1) {
      // Range sums to the workspace; the last range of the tile to arrive adds them in range order.
      float* tile_partials = segs.partial + static_cast<int64_t>(tile) * segs.splits * NT * 128;
      // (The barrier orders the block's sums before thread 0's release; its acquire and the second
      // barrier order the other ranges' sums before the last range's loads.)
      if (active)
#pragma unroll
        for (int e = 0; e < 4; ++e) tile_partials[(blockIdx.y * NT * 4 + j * 4 + e) * 32 + l] = v[e];
      __syncthreads();
      if (threadIdx.x == 0) last_range = counter_add_acq_rel(&segs.counters[tile], 1u) == static_cast<uint32_t>(segs.splits - 1);
      __syncthreads();
      if (!last_range) return;
      // Four ranges' sums loaded at a time, then added in range order.
      if (active) {
#pragma unroll
        for (int e = 0; e < 4; ++e) v[e] = 0;
        for (int r0 = 0; r0 < segs.splits; r0 += 4) {
          float part[4][4];
#pragma unroll
          for (int r = 0; r < 4; ++r)
#pragma unroll
            for (int e = 0; e < 4; ++e) part[r][e] = r0 + r < segs.splits ? __ldcg(tile_partials + ((r0 + r) * NT * 4 + j * 4 + e) * 32 + l) : 0.0f;
#pragma unroll
          for (int r = 0; r < 4; ++r)
#pragma unroll
            for (int e = 0; e < 4; ++e)
              if (r0 + r < segs.splits) v[e] += part[r][e];
        }
      }
      if (threadIdx.x == 0) segs.counters[tile] = 0;  // ready for the next launch
    }
    // v[e]: row row0 + l/4 (+8 for e >= 2; the up row for SwiGLU), column 8j + 2(l%4) + (e&1).
    if (active) store_tile_sums(segs.seg[s], pairs, segs.act, segs.ld_act, row0 + l / 4, 8 * j + 2 * (l % 4), n, v);
    if (!kPersistent) return;
    tile += gridDim.x;
    if (tile >= tiles) return;
    locate();
    load_group(0);
    __syncthreads();  // red was read above; the next tile writes it
  }
}

// Blocks of `kernel` the current device holds at once with `smem` bytes of dynamic shared memory;
// remembered per (device, kernel, smem).
int64_t resident_blocks(const void* kernel, std::size_t smem) {
  struct Entry {
    int device;
    const void* kernel;
    std::size_t smem;
    int64_t blocks;
  };
  thread_local std::vector<Entry> known;
  int device = 0;
  QWENRT_CUDA_CHECK(cudaGetDevice(&device));
  for (const Entry& e : known)
    if (e.device == device && e.kernel == kernel && e.smem == smem) return e.blocks;
  int per_sm = 0, sms = 0;
  QWENRT_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kThreads, smem));
  QWENRT_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const int64_t blocks = static_cast<int64_t>(per_sm) * sms;
  known.push_back({device, kernel, smem, blocks});
  return blocks;
}

// Dynamic shared memory of a launch: the normalised rows' K range in bf16 (kNorm), else none.
template <bool kNorm>
std::size_t normed_rows_bytes(int n, const Segments& segs) {
  return kNorm ? static_cast<std::size_t>(n) * segs.split_chunks * kChunk * sizeof(__nv_bfloat16) : 0;
}

template <int NT, bool kNorm, int U, bool kPersistent = false>
void launch_variant(const __nv_bfloat16* x, int n, int64_t k, int64_t ldx, const Segments& segs, int tiles, cudaStream_t stream) {
  const auto kernel = skinny_gemm_kernel<NT, kNorm, U, kPersistent>;
  const std::size_t smem = normed_rows_bytes<kNorm>(n, segs);
  if (smem > 40 * 1024) {
    static const cudaError_t raised =
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kSkinnyGemmMaxSharedBytes));
    QWENRT_CUDA_CHECK(raised);
  }
  int64_t blocks = tiles;
  if constexpr (kPersistent) {
    // As few rounds as the resident blocks allow, then as few blocks as those rounds need: every
    // block takes the same number of tiles, give or take one.
    const int64_t resident = resident_blocks(reinterpret_cast<const void*>(kernel), smem);
    const int64_t rounds = (tiles + resident - 1) / resident;
    blocks = (tiles + rounds - 1) / rounds;
  }
  launch_chained(kernel, dim3(static_cast<unsigned>(blocks), segs.splits), dim3(kThreads), smem, stream, x, n, k, ldx, segs);
}

// One n-tile, normalised rows: persistent blocks (U = 2), which normalise once (H200 decode,
// against one block per tile: 0.8B +1.8%, 9B +1.9%, 27B +0.4%; U = 3 lost 0.8B 9%).
// One n-tile otherwise: the deepest groups whose blocks all fit the GPU at once (27B out_proj and
// down, 320 tiles: U = 3; 9B, 256 tiles: U = 4; measured on the H200: 27B decode +0.9%, 9B +2.6%).
// Launches too large for one wave keep U = 2 (even two waves of it measured faster than groups
// loaded one after another: 9B q/k/v with the norm, 640 blocks, +1%).
template <int NT, bool kNorm = false>
void launch(const __nv_bfloat16* x, int n, int64_t k, int64_t ldx, const Segments& segs, int tiles, cudaStream_t stream) {
  if constexpr (NT == 1 && kNorm) {
    if (segs.splits == 1) return launch_variant<NT, kNorm, 2, true>(x, n, k, ldx, segs, tiles, stream);
  }
  if constexpr (NT == 1) {
    const std::size_t smem = normed_rows_bytes<kNorm>(n, segs);
    const int64_t blocks = static_cast<int64_t>(tiles) * segs.splits;
    if (blocks <= resident_blocks(reinterpret_cast<const void*>(skinny_gemm_kernel<NT, kNorm, 4>), smem))
      return launch_variant<NT, kNorm, 4>(x, n, k, ldx, segs, tiles, stream);
    if (blocks <= resident_blocks(reinterpret_cast<const void*>(skinny_gemm_kernel<NT, kNorm, 3>), smem))
      return launch_variant<NT, kNorm, 3>(x, n, k, ldx, segs, tiles, stream);
  }
  launch_variant<NT, kNorm, default_group_steps<NT>()>(x, n, k, ldx, segs, tiles, stream);
}

// Row tiles below which a launch splits K to keep every multiprocessor streaming (a fixed number,
// not read off the device: the split, and so the rounding, is then the same on every GPU).
// A split launch has fewer tiles than this, so kSkinnyGemmCounters counters suffice. (1024 and
// 2048 measured slower: more blocks, more partial sums, no more bandwidth.)
constexpr int64_t kTargetBlocks = kSkinnyGemmCounters;
constexpr int64_t kMinChunksPerSplit = 8;  // 256 k: a range short enough to be all latency
constexpr int64_t kUnsplitTiles = 256;
constexpr int64_t kUnsplitBytes = int64_t{48} << 20;  // ... and at least this much weight, or
constexpr int64_t kUnsplitMaxK = 2048;                // ... at most this k

constexpr int64_t kPrefetchL2MaxBytes = int64_t{40} << 20;
// QWENRT_CUDA_PREFETCH_L2=0 switches the L2 prefetch off (for comparisons).
bool prefetch_l2_enabled() { return runtime_options().prefetch_l2; }

// K ranges for a launch of `tiles` row tiles over k: a function of the weights' shapes alone, so
// an output row's rounding does not depend on the batch.
int64_t split_count(int64_t tiles, int64_t k) {
  // From two tiles per multiprocessor and 48 MiB on, the overlapped kernel streams a launch alone
  // faster than split in two with the partial-sum pass (H200, 27B out_proj and down, 320 tiles:
  // decode +0.6-0.9%, bench/results/2026-12-03-1500-h200.md). A smaller one (9B out_proj and
  // o_proj: 256 tiles, 32 MiB, 16 steps per warp) drains between too few groups: split in two,
  // 9B decode +0.7% (bench/results/2026-12-04-1300-h200.md).
  // Likewise over a short K: 0.8B's q/k/v (320 tiles, k 1024) whole runs as persistent blocks that
  // normalise the rows once, in one wave; split in two, its 640 blocks normalised them again and
  // took two waves (0.8B decode +2.1%). (The plain launch of 3..8 rows splits as the normalised one
  // of 1..2 does: the same bits at every batch size.)
  if (tiles >= kUnsplitTiles && (tiles * kTileRows * k * int64_t{sizeof(__nv_bfloat16)} >= kUnsplitBytes || k <= kUnsplitMaxK)) return 1;
  const int64_t chunks = (k + kChunk - 1) / kChunk;
  int64_t splits = 1;
  while (tiles * splits < kTargetBlocks && chunks / (splits * 2) >= kMinChunksPerSplit) splits *= 2;
  return splits;
}

int64_t partial_bytes(int64_t n, int64_t tiles, int64_t k) {
  const int64_t splits = split_count(tiles, k);
  return splits == 1 ? 0 : tiles * splits * ((n + 7) / 8) * 128 * static_cast<int64_t>(sizeof(float));
}

int64_t tiles_of(std::span<const GemmSegment> segments) {
  int64_t tiles = 0;
  for (const auto& s : segments) tiles += (s.rows + kTileRows - 1) / kTileRows;
  return tiles;
}

int64_t swiglu_tiles(int64_t rows) { return (rows + kTileRows / 2 - 1) / (kTileRows / 2); }

void check_common(const __nv_bfloat16* x, int64_t n, int64_t k, int64_t ldx, const char* who) {
  if (n < 1 || n > kSkinnyGemmMaxRows) fail(who, ": ", n, " activation rows; it takes 1 to ", kSkinnyGemmMaxRows);
  if (k < 8 || k % 8 != 0 || ldx < k || ldx % 8 != 0) fail(who, ": k ", k, " and ldx ", ldx, " must be multiples of 8 with ldx >= k");
  if (reinterpret_cast<uintptr_t>(x) % 16 != 0) fail(who, ": activations are not 16-byte aligned");
}

// Fills the split and the workspace of `segs` (first_tile set), checks the workspace, launches.
void run(const __nv_bfloat16* x, int64_t n, int64_t k, int64_t ldx, Segments& segs, int64_t tiles, const SkinnyGemmWorkspace& ws, cudaStream_t stream,
         const char* who) {
  if (tiles > (1ll << 31) - 1) fail(who, ": too many weight rows");
  segs.splits = static_cast<int>(split_count(tiles, k));
  segs.split_chunks = ((k + kChunk - 1) / kChunk + segs.splits - 1) / segs.splits;
  // Plain launches whose weights fit in L2 alongside the rest of a step prefetch them into L2 before
  // the wait (9B out_proj and o_proj: 32 MiB behind the DeltaNet step or the attention merge).
  segs.prefetch_l2 = !segs.norm.h && tiles * kTileRows * k * int64_t{sizeof(__nv_bfloat16)} <= kPrefetchL2MaxBytes &&
                     (segs.splits - 1) * segs.split_chunks <= (k + kChunk - 1) / kChunk && prefetch_l2_enabled();
  segs.partial = static_cast<float*>(ws.partial);
  segs.counters = ws.counters;
  if (segs.splits > 1) {
    const auto need = static_cast<std::size_t>(partial_bytes(n, tiles, k));
    if (!ws.partial || ws.partial_bytes < need || !ws.counters)
      fail(who, ": needs ", need, " bytes of workspace and the tile counters for ", segs.splits, " K ranges, got ", ws.partial_bytes,
           ws.counters ? "" : " and no counters");
  }
  const int nt = static_cast<int>((n + 7) / 8), b = static_cast<int>(tiles), rows = static_cast<int>(n);
  if (segs.norm.h) {
    launch<1, true>(x, rows, k, ldx, segs, b, stream);
    QWENRT_CUDA_CHECK_LAUNCH();
    return;
  }
  switch (nt) {
    case 1: launch<1>(x, rows, k, ldx, segs, b, stream); break;
    case 2: launch<2>(x, rows, k, ldx, segs, b, stream); break;
    case 3: launch<3>(x, rows, k, ldx, segs, b, stream); break;
    case 4: launch<4>(x, rows, k, ldx, segs, b, stream); break;
    case 5: launch<5>(x, rows, k, ldx, segs, b, stream); break;
    case 6: launch<6>(x, rows, k, ldx, segs, b, stream); break;
    case 7: launch<7>(x, rows, k, ldx, segs, b, stream); break;
    default: launch<8>(x, rows, k, ldx, segs, b, stream); break;
  }
  QWENRT_CUDA_CHECK_LAUNCH();
}

}  // namespace

std::size_t skinny_gemm_workspace_bytes(int64_t n, int64_t k, std::span<const GemmSegment> segments) {
  return static_cast<std::size_t>(partial_bytes(n, tiles_of(segments), k));
}

std::size_t skinny_gemm_swiglu_workspace_bytes(int64_t n, int64_t k, int64_t rows) {
  return static_cast<std::size_t>(partial_bytes(n, swiglu_tiles(rows), k));
}

namespace {

// The launch's weights, checked; first_tile set.
Segments segments_of(std::span<const GemmSegment> segments, int64_t& tiles) {
  if (segments.empty() || segments.size() > kSkinnyGemmMaxSegments)
    fail("skinny_gemm: ", segments.size(), " weights; it takes 1 to ", kSkinnyGemmMaxSegments);
  Segments segs{};
  segs.count = static_cast<int>(segments.size());
  tiles = 0;
  for (int i = 0; i < segs.count; ++i) {
    const GemmSegment& s = segments[i];
    if (s.rows < 1 || s.ldy < s.rows || reinterpret_cast<uintptr_t>(s.w) % 16 != 0 || !s.y)
      fail("skinny_gemm: weight ", i, " has ", s.rows, " rows, ldy ", s.ldy, " (needs rows >= 1, ldy >= rows, 16-byte alignment, an output)");
    segs.seg[i] = s;
    segs.first_tile[i] = static_cast<int>(tiles);
    tiles += (s.rows + kTileRows - 1) / kTileRows;
  }
  segs.first_tile[segs.count] = static_cast<int>(tiles);
  return segs;
}

Segments swiglu_of(const __nv_bfloat16* gate, const __nv_bfloat16* up, int64_t rows, __nv_bfloat16* act, int64_t ld_act, int64_t& tiles) {
  if (rows < 1 || ld_act < rows || !act || reinterpret_cast<uintptr_t>(gate) % 16 != 0 || reinterpret_cast<uintptr_t>(up) % 16 != 0)
    fail("skinny_gemm_swiglu: ", rows, " rows, ld_act ", ld_act, " (needs rows >= 1, ld_act >= rows, 16-byte aligned weights, an output)");
  Segments segs{};
  segs.count = 1;
  segs.seg[0] = {gate, rows, nullptr, 0, false};
  segs.up = up;
  segs.act = act;
  segs.ld_act = ld_act;
  tiles = swiglu_tiles(rows);
  segs.first_tile[1] = static_cast<int>(tiles);
  return segs;
}

// Checks the normalised rows and puts them in `segs`: no output of the launch may be h itself,
// which every block reads.
void set_norm(Segments& segs, const SkinnyNormedRows& x, int64_t n, int64_t k, const char* who) {
  if (n < 1 || n > kSkinnyGemmMaxNormedRows) fail(who, ": ", n, " normalised rows; it takes 1 to ", kSkinnyGemmMaxNormedRows);
  if (k < 8 || k % 8 != 0 || k > kSkinnyGemmMaxNormedK) fail(who, ": k ", k, " must be a multiple of 8 up to ", kSkinnyGemmMaxNormedK);
  if (!x.h || !x.w || x.ldh < k || x.ldh % 4 != 0 || reinterpret_cast<uintptr_t>(x.h) % 16 != 0 || reinterpret_cast<uintptr_t>(x.w) % 16 != 0)
    fail(who, ": rows h (stride ", x.ldh, ") and norm weight need 16-byte alignment and a stride of at least k in multiples of 4");
  if (!(x.eps >= 0)) fail(who, ": eps ", x.eps, " must be >= 0");
  const float* h_end = x.h + (n - 1) * x.ldh + k;
  for (int i = 0; i < segs.count; ++i) {
    const float* y = segs.seg[i].y;
    if (y && y + (n - 1) * segs.seg[i].ldy + segs.seg[i].rows > x.h && y < h_end) fail(who, ": an output overlaps the rows being normalised");
  }
  if (x.out) {
    if (x.ld_out < k || x.ld_out % 4 != 0 || reinterpret_cast<uintptr_t>(x.out) % 8 != 0)
      fail(who, ": the normalised rows' copy (stride ", x.ld_out, ") needs 8-byte alignment and a stride of at least k in multiples of 4");
    const void* out_end = x.out + (n - 1) * x.ld_out + k;
    if (out_end > static_cast<const void*>(x.h) && static_cast<const void*>(x.out) < static_cast<const void*>(h_end))
      fail(who, ": the normalised rows' copy overlaps the rows being normalised");
  }
  segs.norm = x;
}

}  // namespace

void skinny_gemm(const __nv_bfloat16* x, int64_t n, int64_t k, int64_t ldx, std::span<const GemmSegment> segments, cudaStream_t stream,
                 const SkinnyGemmWorkspace& workspace) {
  check_common(x, n, k, ldx, "skinny_gemm");
  int64_t tiles = 0;
  Segments segs = segments_of(segments, tiles);
  run(x, n, k, ldx, segs, tiles, workspace, stream, "skinny_gemm");
}

void skinny_gemm(const SkinnyNormedRows& x, int64_t n, int64_t k, std::span<const GemmSegment> segments, cudaStream_t stream,
                 const SkinnyGemmWorkspace& workspace) {
  int64_t tiles = 0;
  Segments segs = segments_of(segments, tiles);
  set_norm(segs, x, n, k, "skinny_gemm");
  run(nullptr, n, k, k, segs, tiles, workspace, stream, "skinny_gemm");
}

void skinny_gemm_swiglu(const __nv_bfloat16* x, int64_t n, int64_t k, int64_t ldx, const __nv_bfloat16* gate, const __nv_bfloat16* up, int64_t rows,
                        __nv_bfloat16* act, int64_t ld_act, cudaStream_t stream, const SkinnyGemmWorkspace& workspace) {
  check_common(x, n, k, ldx, "skinny_gemm_swiglu");
  int64_t tiles = 0;
  Segments segs = swiglu_of(gate, up, rows, act, ld_act, tiles);
  run(x, n, k, ldx, segs, tiles, workspace, stream, "skinny_gemm_swiglu");
}

void skinny_gemm_swiglu(const SkinnyNormedRows& x, int64_t n, int64_t k, const __nv_bfloat16* gate, const __nv_bfloat16* up, int64_t rows,
                        __nv_bfloat16* act, int64_t ld_act, cudaStream_t stream, const SkinnyGemmWorkspace& workspace) {
  int64_t tiles = 0;
  Segments segs = swiglu_of(gate, up, rows, act, ld_act, tiles);
  set_norm(segs, x, n, k, "skinny_gemm_swiglu");
  run(nullptr, n, k, k, segs, tiles, workspace, stream, "skinny_gemm_swiglu");
}

}  // namespace qwenrt::cuda
