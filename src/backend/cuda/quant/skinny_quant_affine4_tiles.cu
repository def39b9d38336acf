// Decode-shaped products over MLX affine 4-bit weights in tensor-core tiles (affine4_tiles.h;
// skinny_quant_gemm.h). Per group of a row the exact sums C = Σ q·x and X = Σ x come from the
// tensor cores (m16n8k16, f32 sums): each pair of fields becomes an exact bf16 pair (q under the
// exponent of 128 by one LOP3, then 128 subtracted, exactly), X is the activations' product with
// ones; each group is then folded in f32, y = fma(s, C, y), y = fma(b, X, y). Block = one 16-row
// tile, the K split among its 8 warps, the next units' loads in flight while the current ones are
// multiplied, the warps' sums added in warp order (skinny_quant_fp8.cu's skeleton).
//
// Batch-invariant: column g of the products is activation row g (lanes past n read row n - 1 and
// their columns are never stored), nothing mixes columns and every sum is taken in a fixed order,
// so a row's result is the same bits alone or among 8.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "backend/cuda/ptx/mma.cuh"
#include "backend/cuda/quant/affine4_tiles.h"
#include "backend/cuda/quant/skinny_quant_kernels.h"
#include "backend/cuda/quant/tile_blocks.cuh"
#include "backend/cuda/runtime/chained_launch.h"
#include "backend/cuda/runtime/cuda_check.h"
#include "core/error.h"

namespace qwenrt::cuda {
namespace {

namespace at = affine4_tiles;

using tile_blocks::kRedBytes;
using tile_blocks::kThreads;
using tile_blocks::kWarps;
using TileSegments = tile_blocks::Segments;

// A group's table entry for lane (g, t): scale and bias of rows g and g + 8 of the tile, as stored
// (four 16-bit values, or four f32), read with one load that is used once.
template <QuantScale ST>
using EntryBits = std::conditional_t<ST == QuantScale::F32, uint4, uint2>;

template <QuantScale ST>
__device__ __forceinline__ EntryBits<ST> load_entry(const EntryBits<ST>* p) {
  if constexpr (ST == QuantScale::F32) return load_stream16(p);
  else return load_stream8(p);
}

// A batch: U units (16-byte loads) a lane issues before it multiplies them, compiled for
// kMinBlocks blocks per multiprocessor (registers: 128 at two, 80 at three, 64 at four): depth 4 at
// two, 3 at three, 2 at four, one block fewer where the table entries take more registers (groups
// of 32: two entries a unit; f32: 16 bytes an entry), never below two, so that none spills. Deeper
// batches keep more bytes in flight, shallower ones let more blocks stay resident: a launch runs
// the deepest batch whose blocks all fit the GPU at once, else the shallowest (launch()). The sums
// are the same at every depth, bit for bit.
template <QuantScale ST, int G, int U>
inline constexpr int kMinBlocks = std::max(2, 6 - U - (G == 32 ? 1 : 0) - (ST == QuantScale::F32 ? 1 : 0));

// (scale of g, bias of g, scale of g + 8, bias of g + 8) in f32 (exact).
template <QuantScale ST>
__device__ __forceinline__ float4 widen(const EntryBits<ST>& e) {
  if constexpr (ST == QuantScale::F32) {
    return make_float4(__uint_as_float(e.x), __uint_as_float(e.y), __uint_as_float(e.z), __uint_as_float(e.w));
  } else if constexpr (ST == QuantScale::BF16) {
    return make_float4(__uint_as_float(e.x << 16), __uint_as_float(e.x & 0xffff0000u), __uint_as_float(e.y << 16), __uint_as_float(e.y & 0xffff0000u));
  } else {
    return make_float4(__half2float(__ushort_as_half(static_cast<unsigned short>(e.x & 0xffffu))), __half2float(__ushort_as_half(static_cast<unsigned short>(e.x >> 16))),
                       __half2float(__ushort_as_half(static_cast<unsigned short>(e.y & 0xffffu))), __half2float(__ushort_as_half(static_cast<unsigned short>(e.y >> 16))));
  }
}

__device__ __forceinline__ uint32_t word_of(const uint4& v, int s) { return s == 0 ? v.x : s == 1 ? v.y : s == 2 ? v.z : v.w; }

// Step s's A fragments from the lane's word s: the fields q exactly, as bf16 pairs.
__device__ __forceinline__ void a_fragments(uint32_t word, uint32_t (&a)[4]) {
  const uint32_t k128 = at::kBf16Pair128;
#pragma unroll
  for (int p = 0; p < 4; ++p) {
    const uint32_t biased = at::biased_pair(word, p);
    const __nv_bfloat162 q = __hsub2(*reinterpret_cast<const __nv_bfloat162*>(&biased), *reinterpret_cast<const __nv_bfloat162*>(&k128));
    a[p] = *reinterpret_cast<const uint32_t*>(&q);
  }
}

// One group folded into the lane's outputs y (rows g, g + 8 × batch columns 2t, 2t + 1): its sums
// c = Σ q·x and xs = Σ x (the same for both rows), its scales and biases sb = (s_g, b_g, s_g+8, b_g+8).
__device__ __forceinline__ void fold(float (&y)[4], const float (&c)[4], const float (&xs)[4], const float4& sb) {
  y[0] = __fmaf_rn(sb.y, xs[0], __fmaf_rn(sb.x, c[0], y[0]));
  y[1] = __fmaf_rn(sb.y, xs[1], __fmaf_rn(sb.x, c[1], y[1]));
  y[2] = __fmaf_rn(sb.w, xs[2], __fmaf_rn(sb.z, c[2], y[2]));
  y[3] = __fmaf_rn(sb.w, xs[3], __fmaf_rn(sb.z, c[3], y[3]));
}

// Block = one 16-row tile of one segment; warp w takes chunks w, w + 8, ... of the row, a chunk
// being whole units and whole groups (one unit for groups of 32 and 64, two for 128). A lane loads
// a batch of U units and their groups' table entries at once, the next batch while it multiplies
// this one; per step one product for C and one with ones for X.
template <QuantScale ST, int G, int U>
__global__ void __launch_bounds__(kThreads, kMinBlocks<ST, G, U>)
    skinny_affine4_tiles_kernel(const __nv_bfloat16* __restrict__ x, int n, int64_t ldx, TileSegments segs) {
  constexpr int kUnitsPerChunk = G > at::kUnitCols ? G / at::kUnitCols : 1;
  constexpr int kGroupsPerChunk = G < at::kUnitCols ? at::kUnitCols / G : 1;
  constexpr int kStepsPerGroup = G / 16;
  static_assert(U % kUnitsPerChunk == 0, "a batch holds whole chunks");
  constexpr int kChunksPerBatch = U / kUnitsPerChunk;
  constexpr int kGroupsPerBatch = kChunksPerBatch * kGroupsPerChunk;
  using Bits = EntryBits<ST>;

  extern __shared__ float4 smem_raw[];
  float* red = reinterpret_cast<float*>(smem_raw);  // the warps' sums: [warp][e][lane] (kRedBytes)
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const auto [seg, wtile] = tile_blocks::place_of(segs);
  const QuantMatrix& m = seg.w;
  const int units = static_cast<int>(m.cols / at::kUnitCols), groups = static_cast<int>(m.cols / G);
  const int chunks = units / kUnitsPerChunk;
  const int warp_chunks = warp < chunks ? (chunks - 1 - warp) / kWarps + 1 : 0;
  const int batches = (warp_chunks + kChunksPerBatch - 1) / kChunksPerBatch;
  const uint8_t* fields = static_cast<const uint8_t*>(m.data) + wtile * units * at::kUnitBytes + 16 * lane;
  const Bits* entries = static_cast<const Bits*>(m.scales) + wtile * groups * 8 + g;

  uint4 next_w[U];
  Bits next_s[kGroupsPerBatch];
  auto load_batch = [&](int b) {
#pragma unroll
    for (int ci = 0; ci < kChunksPerBatch; ++ci) {
      const int i = b * kChunksPerBatch + ci, chunk = warp + i * kWarps;
      const bool here = i < warp_chunks;
#pragma unroll
      for (int u = 0; u < kUnitsPerChunk; ++u)
        next_w[ci * kUnitsPerChunk + u] =
            here ? load_stream16(fields + static_cast<int64_t>(chunk * kUnitsPerChunk + u) * at::kUnitBytes) : make_uint4(0, 0, 0, 0);
#pragma unroll
      for (int gi = 0; gi < kGroupsPerChunk; ++gi)
        next_s[ci * kGroupsPerChunk + gi] = here ? load_entry<ST>(entries + static_cast<int64_t>(chunk * kGroupsPerChunk + gi) * 8) : Bits{};
    }
  };
  if (batches > 0) load_batch(0);  // weights never change: in flight before the wait on the kernel ahead
  chained_kernel_start();

  // Lane (g, t) reads activation row g (n - 1 past n), columns 16s + 4t .. + 3 of each unit.
  const __nv_bfloat16* xrow = x + static_cast<int64_t>(g < n ? g : n - 1) * ldx + 4 * t;
  float y[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  for (int b = 0; b < batches; ++b) {
    uint4 cur_w[U];
    Bits cur_s[kGroupsPerBatch];
#pragma unroll
    for (int u = 0; u < U; ++u) cur_w[u] = next_w[u];
#pragma unroll
    for (int e = 0; e < kGroupsPerBatch; ++e) cur_s[e] = next_s[e];
    if (b + 1 < batches) load_batch(b + 1);  // in flight while these are multiplied
    // The batch's activations, all loads issued before the products: one round trip a batch, not
    // one a chunk (a chunk past the row reads the row's first unit and is not multiplied).
    uint2 xv[U][4];
#pragma unroll
    for (int ci = 0; ci < kChunksPerBatch; ++ci) {
      const int i = b * kChunksPerBatch + ci;
#pragma unroll
      for (int u = 0; u < kUnitsPerChunk; ++u) {
        const int unit = i < warp_chunks ? (warp + i * kWarps) * kUnitsPerChunk + u : 0;
#pragma unroll
        for (int s = 0; s < 4; ++s) xv[ci * kUnitsPerChunk + u][s] = load_shared8_now(xrow + static_cast<int64_t>(unit) * at::kUnitCols + 16 * s);
      }
    }
#pragma unroll
    for (int ci = 0; ci < kChunksPerBatch; ++ci) {
      if (b * kChunksPerBatch + ci >= warp_chunks) break;
      float c[4] = {0.0f, 0.0f, 0.0f, 0.0f}, xs[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
      for (int u = 0; u < kUnitsPerChunk; ++u)
#pragma unroll
        for (int s = 0; s < 4; ++s) {
          const int unit = ci * kUnitsPerChunk + u, step = 4 * u + s;
          uint32_t a[4];
          a_fragments(word_of(cur_w[unit], s), a);
          const uint2 bx = xv[unit][s];
          mma_bf16_16816(c, a[0], a[1], a[2], a[3], bx.x, bx.y);
          mma_bf16_16816(xs, at::kBf16PairOnes, at::kBf16PairOnes, at::kBf16PairOnes, at::kBf16PairOnes, bx.x, bx.y);
          if ((step + 1) % kStepsPerGroup == 0) {
            fold(y, c, xs, widen<ST>(cur_s[ci * kGroupsPerChunk + step / kStepsPerGroup]));
#pragma unroll
            for (int e = 0; e < 4; ++e) c[e] = xs[e] = 0.0f;
          }
        }
    }
  }

  tile_blocks::finish(y, red, seg, wtile * at::kTileRows, n);
}

// Blocks of `kernel` the current device holds at once; remembered per (device, kernel).
int64_t resident_blocks(const void* kernel) {
  struct Entry {
    int device;
    const void* kernel;
    int64_t blocks;
  };
  thread_local std::vector<Entry> known;
  int device = 0;
  QWENRT_CUDA_CHECK(cudaGetDevice(&device));
  for (const Entry& e : known)
    if (e.device == device && e.kernel == kernel) return e.blocks;
  int per_sm = 0, sms = 0;
  QWENRT_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kThreads, kRedBytes));
  QWENRT_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  known.push_back({device, kernel, static_cast<int64_t>(per_sm) * sms});
  return known.back().blocks;
}

// Launches depth U unless `only_if_resident` and the launch's blocks do not all fit the GPU at once.
template <QuantScale ST, int G, int U>
bool launch_depth(const __nv_bfloat16* x, int n, int64_t ldx, const TileSegments& segs, cudaStream_t stream, bool only_if_resident) {
  const auto kernel = skinny_affine4_tiles_kernel<ST, G, U>;
  const int64_t tiles = segs.first_tile[segs.count];
  if (only_if_resident && tiles > resident_blocks(reinterpret_cast<const void*>(kernel))) return false;
  launch_chained(kernel, dim3(static_cast<unsigned>(tiles)), dim3(kThreads), kRedBytes, stream, x, n, ldx, segs);
  return true;
}

// The deepest batch whose blocks all fit the GPU at once, else depth 2 (H100, against depth 4 at
// two blocks per multiprocessor everywhere: 27B q4 decode 116.5 -> 140 tok/s with depth 2 at four
// blocks for launches of several waves; 27B's ffn down, 320 tiles in one wave, 59% -> 78% of copy
// at depth 3 against 2). Depths that would spill registers are not compiled: depth 3 only for
// 16-bit scales in groups of 64 (groups of 128 are chunks of two units), and f32 scales in groups
// of 32 run depth 2 only.
template <QuantScale ST, int G>
void launch(const __nv_bfloat16* x, int n, int64_t ldx, const TileSegments& segs, cudaStream_t stream) {
  if constexpr (ST != QuantScale::F32 || G != 32) {
    if (launch_depth<ST, G, 4>(x, n, ldx, segs, stream, true)) return;
    if constexpr (ST != QuantScale::F32 && G == 64)
      if (launch_depth<ST, G, 3>(x, n, ldx, segs, stream, true)) return;
  }
  launch_depth<ST, G, 2>(x, n, ldx, segs, stream, false);
}

template <QuantScale ST>
void launch_group(int group_size, const __nv_bfloat16* x, int n, int64_t ldx, const TileSegments& segs, cudaStream_t stream) {
  switch (group_size) {
    case 32: launch<ST, 32>(x, n, ldx, segs, stream); break;
    case 64: launch<ST, 64>(x, n, ldx, segs, stream); break;
    default: launch<ST, 128>(x, n, ldx, segs, stream); break;
  }
}

}  // namespace

void skinny_quant_affine4_tiles(const __nv_bfloat16* x, int64_t n, int64_t ldx, std::span<const QuantSegment> segments, cudaStream_t stream) {
  const QuantMatrix& first = segments[0].w;
  for (const QuantSegment& s : segments)
    if (!s.w.tiled || s.w.group_size != first.group_size || s.w.scale_type != first.scale_type)
      fail("internal: tiled 4-bit weights of different group sizes or scale types in one launch");
  const TileSegments segs = tile_blocks::segments(segments);
  switch (first.scale_type) {
    case QuantScale::BF16: launch_group<QuantScale::BF16>(first.group_size, x, static_cast<int>(n), ldx, segs, stream); break;
    case QuantScale::F16: launch_group<QuantScale::F16>(first.group_size, x, static_cast<int>(n), ldx, segs, stream); break;
    case QuantScale::F32: launch_group<QuantScale::F32>(first.group_size, x, static_cast<int>(n), ldx, segs, stream); break;
  }
  QWENRT_CUDA_CHECK_LAUNCH();
}

}  // namespace qwenrt::cuda
