// Decode-shaped products over MLX affine weights in 4-bit and 8-bit containers in tensor-core tiles
// (affine_tiles.h; skinny_quant_gemm.h). Per group of a row the exact sums C = Σ q·x and X = Σ x
// come from the tensor cores (m16n8k16, f32 sums): each pair of fields becomes an exact bf16 pair (q
// under the exponent of 128 by one LOP3, then 128 subtracted, exactly), X is the activations'
// product with ones; each group is then folded in f32, y = fma(s, C, y), y = fma(b, X, y). 8-bit
// fields are two planes of nibbles, two products into the same sums: the low nibbles as above, the
// high ones under the exponent of 2048 (16·n exactly) less 128, so that C = Σ (q - 128)·x and the
// bias folded is b + 128·s (affine_tiles.h high_pair: the terms do not cancel). Block = one 16-row
// tile, the K split among its 8 warps, the next units' loads in flight while the current ones are
// multiplied, the warps' sums added in warp order (skinny_quant_fp8.cu's skeleton).
//
// More rows: NT n-tiles of 8 activation rows each (two or four: up to 32 rows a launch); each
// weight fragment made once per step feeds NT products, so the weights stream once for all of them.
//
// Batch-invariant: column g of n-tile j is activation row 8j + g (lanes past n read row n - 1 and
// their columns are never stored), nothing mixes columns and every sum is taken in a fixed order,
// the same for every NT, so a row's result is the same bits alone, among 8 or among 32.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "backend/cuda/ptx/mma.cuh"
#include "backend/cuda/quant/affine_tiles.h"
#include "backend/cuda/quant/skinny_quant_kernels.h"
#include "backend/cuda/quant/tile_blocks.cuh"
#include "backend/cuda/runtime/chained_launch.h"
#include "backend/cuda/runtime/cuda_check.h"
#include "core/error.h"

namespace qwenrt::cuda {
namespace {

namespace at = affine_tiles;

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

// A batch: U units a lane loads before it multiplies them (U · planes 16-byte loads), compiled for
// kMinBlocks blocks per multiprocessor (registers: 128 at two, 80 at three, 64 at four): 4 loads at
// two, 3 at three, 2 at four, one block fewer where the table entries take more registers (groups
// of 32: two entries a unit; f32: 16 bytes an entry), never below two, so that none spills. Deeper
// batches keep more bytes in flight, shallower ones let more blocks stay resident: a launch runs
// the deepest batch whose blocks all fit the GPU at once, else the shallowest (launch()). The sums
// are the same at every depth, bit for bit. Several n-tiles (NT > 1: 48 sums a lane for four) run
// the shallowest depth (kNTilesDepth) at two blocks, or one where 128 registers would spill (8-bit
// groups of 128, whose chunks are two units).
template <int Bits, QuantScale ST, int G, int U, int NT>
inline constexpr int kMinBlocks = NT > 1 ? (Bits == 8 && G == 128 ? 1 : 2)
                                         : std::max(2, 6 - U * at::planes(Bits) - (G == 32 ? 1 : 0) - (ST == QuantScale::F32 ? 1 : 0));
template <int G>
inline constexpr int kNTilesDepth = G == 128 ? 2 : 1;

// (scale of g, bias of g, scale of g + 8, bias of g + 8) in f32 (exact).
template <QuantScale ST>
__device__ __forceinline__ float4 widen(const EntryBits<ST>& e) {
  if constexpr (ST == QuantScale::F32) {
    return make_float4(__uint_as_float(e.x), __uint_as_float(e.y), __uint_as_float(e.z), __uint_as_float(e.w));
  } else if constexpr (ST == QuantScale::BF16) {
    return make_float4(__uint_as_float(e.x << 16), __uint_as_float(e.x & 0xffff0000u), __uint_as_float(e.y << 16),
                       __uint_as_float(e.y & 0xffff0000u));
  } else {
    return make_float4(__half2float(__ushort_as_half(static_cast<unsigned short>(e.x & 0xffffu))),
                       __half2float(__ushort_as_half(static_cast<unsigned short>(e.x >> 16))),
                       __half2float(__ushort_as_half(static_cast<unsigned short>(e.y & 0xffffu))),
                       __half2float(__ushort_as_half(static_cast<unsigned short>(e.y >> 16))));
  }
}

__device__ __forceinline__ uint32_t word_of(const uint4& v, int s) { return s == 0 ? v.x : s == 1 ? v.y : s == 2 ? v.z : v.w; }

// Step s's A fragments from the lane's word s of a plane, as exact bf16 pairs: the low plane's
// nibbles n (Low), or the high plane's 16·n - 128 (affine_tiles.h).
template <bool Low>
__device__ __forceinline__ void a_fragments(uint32_t word, uint32_t (&a)[4]) {
  const uint32_t offset = Low ? at::kBf16Pair128 : at::kBf16Pair2176;
#pragma unroll
  for (int p = 0; p < 4; ++p) {
    const uint32_t biased = Low ? at::low_pair(word, p) : at::high_pair(word, p);
    const __nv_bfloat162 q = __hsub2(*reinterpret_cast<const __nv_bfloat162*>(&biased), *reinterpret_cast<const __nv_bfloat162*>(&offset));
    a[p] = *reinterpret_cast<const uint32_t*>(&q);
  }
}

// One group folded into the lane's outputs y of an n-tile (rows g, g + 8 × batch columns 2t,
// 2t + 1): its sums c = Σ q·x (8-bit: Σ (q - 128)·x) and xs = Σ x (the same for both rows), its
// scales and biases sb = (s_g, b_g, s_g+8, b_g+8) (8-bit: each bias taken as b + 128·s, one
// rounding).
template <int Bits>
__device__ __forceinline__ void fold(float (&y)[4], const float (&c)[4], const float (&xs)[4], float4 sb) {
  if constexpr (Bits == 8) sb.y = __fmaf_rn(128.0f, sb.x, sb.y), sb.w = __fmaf_rn(128.0f, sb.z, sb.w);
  y[0] = __fmaf_rn(sb.y, xs[0], __fmaf_rn(sb.x, c[0], y[0]));
  y[1] = __fmaf_rn(sb.y, xs[1], __fmaf_rn(sb.x, c[1], y[1]));
  y[2] = __fmaf_rn(sb.w, xs[2], __fmaf_rn(sb.z, c[2], y[2]));
  y[3] = __fmaf_rn(sb.w, xs[3], __fmaf_rn(sb.z, c[3], y[3]));
}

// Block = one 16-row tile of one segment; warp w takes chunks w, w + 8, ... of the row, a chunk
// being whole units and whole groups (one unit for groups of 32 and 64, two for 128). A lane loads
// a batch of U units and their groups' table entries at once, the next batch while it multiplies
// this one; per step and n-tile one product for C (8-bit: one per plane) and one with ones for X.
template <int Bits, QuantScale ST, int G, int U, int NT>
__global__ void __launch_bounds__(kThreads, kMinBlocks<Bits, ST, G, U, NT>)
    skinny_affine_tiles_kernel(const __nv_bfloat16* __restrict__ x, int n, int64_t ldx, TileSegments segs) {
  constexpr int kPlanes = at::planes(Bits), kUnitBytes = at::unit_bytes(Bits);
  constexpr int kUnitsPerChunk = G > at::kUnitCols ? G / at::kUnitCols : 1;
  constexpr int kGroupsPerChunk = G < at::kUnitCols ? at::kUnitCols / G : 1;
  constexpr int kStepsPerGroup = G / 16;
  static_assert(U % kUnitsPerChunk == 0, "a batch holds whole chunks");
  constexpr int kChunksPerBatch = U / kUnitsPerChunk;
  constexpr int kGroupsPerBatch = kChunksPerBatch * kGroupsPerChunk;
  using Entry = EntryBits<ST>;

  extern __shared__ float4 smem_raw[];
  float* red = reinterpret_cast<float*>(smem_raw);  // the warps' sums: [warp][j][e][lane] (kRedBytes<NT>)
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const auto [seg, wtile] = tile_blocks::place_of(segs);
  const QuantMatrix& m = seg.w;
  const int units = static_cast<int>(m.cols / at::kUnitCols), groups = static_cast<int>(m.cols / G);
  const int chunks = units / kUnitsPerChunk;
  const int warp_chunks = warp < chunks ? (chunks - 1 - warp) / kWarps + 1 : 0;
  const int batches = (warp_chunks + kChunksPerBatch - 1) / kChunksPerBatch;
  const uint8_t* fields = static_cast<const uint8_t*>(m.data) + wtile * units * kUnitBytes + 16 * lane;
  const Entry* entries = static_cast<const Entry*>(m.scales) + wtile * groups * 8 + g;

  uint4 next_w[U][kPlanes];
  Entry next_s[kGroupsPerBatch];
  auto load_batch = [&](int b) {
#pragma unroll
    for (int ci = 0; ci < kChunksPerBatch; ++ci) {
      const int i = b * kChunksPerBatch + ci, chunk = warp + i * kWarps;
      const bool here = i < warp_chunks;
#pragma unroll
      for (int u = 0; u < kUnitsPerChunk; ++u)
#pragma unroll
        for (int pl = 0; pl < kPlanes; ++pl)
          next_w[ci * kUnitsPerChunk + u][pl] =
              here ? load_stream16(fields + static_cast<int64_t>(chunk * kUnitsPerChunk + u) * kUnitBytes + pl * at::kPlaneBytes)
                   : make_uint4(0, 0, 0, 0);
#pragma unroll
      for (int gi = 0; gi < kGroupsPerChunk; ++gi)
        next_s[ci * kGroupsPerChunk + gi] = here ? load_entry<ST>(entries + static_cast<int64_t>(chunk * kGroupsPerChunk + gi) * 8) : Entry{};
    }
  };
  if (batches > 0) load_batch(0);  // weights never change: in flight before the wait on the kernel ahead
  chained_kernel_start();

  // Lane (g, t) reads activation row 8j + g of n-tile j (n - 1 past n), columns 16s + 4t .. + 3 of
  // each unit.
  const __nv_bfloat16* xrow[NT];
#pragma unroll
  for (int j = 0; j < NT; ++j) xrow[j] = x + static_cast<int64_t>(8 * j + g < n ? 8 * j + g : n - 1) * ldx + 4 * t;
  float y[NT][4] = {};
  for (int b = 0; b < batches; ++b) {
    uint4 cur_w[U][kPlanes];
    Entry cur_s[kGroupsPerBatch];
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int pl = 0; pl < kPlanes; ++pl) cur_w[u][pl] = next_w[u][pl];
#pragma unroll
    for (int e = 0; e < kGroupsPerBatch; ++e) cur_s[e] = next_s[e];
    if (b + 1 < batches) load_batch(b + 1);  // in flight while these are multiplied
    // The batch's activations, all loads issued before the products: one round trip a batch, not
    // one a chunk (a chunk past the row reads the row's first unit and is not multiplied). Several
    // n-tiles load theirs a unit at a time instead (their registers).
    constexpr int kXUnits = NT == 1 ? U : 1;
    uint2 xv[kXUnits][4][NT];
    auto load_x = [&](int i, int u, uint2(&to)[4][NT]) {
      const int unit = i < warp_chunks ? (warp + i * kWarps) * kUnitsPerChunk + u : 0;
#pragma unroll
      for (int s = 0; s < 4; ++s)
#pragma unroll
        for (int j = 0; j < NT; ++j) to[s][j] = load_shared8_now(xrow[j] + static_cast<int64_t>(unit) * at::kUnitCols + 16 * s);
    };
    if constexpr (NT == 1) {
#pragma unroll
      for (int ci = 0; ci < kChunksPerBatch; ++ci)
#pragma unroll
        for (int u = 0; u < kUnitsPerChunk; ++u) load_x(b * kChunksPerBatch + ci, u, xv[ci * kUnitsPerChunk + u]);
    }
#pragma unroll
    for (int ci = 0; ci < kChunksPerBatch; ++ci) {
      if (b * kChunksPerBatch + ci >= warp_chunks) break;
      float c[NT][4] = {}, xs[NT][4] = {};
#pragma unroll
      for (int u = 0; u < kUnitsPerChunk; ++u) {
        const int unit = ci * kUnitsPerChunk + u;
        if constexpr (NT > 1) load_x(b * kChunksPerBatch + ci, u, xv[0]);
        const uint2(&xu)[4][NT] = xv[NT == 1 ? unit : 0];
#pragma unroll
        for (int s = 0; s < 4; ++s) {
          const int step = 4 * u + s;
          uint32_t lo[4], hi[4];
          a_fragments<true>(word_of(cur_w[unit][0], s), lo);
          if constexpr (kPlanes == 2) a_fragments<false>(word_of(cur_w[unit][1], s), hi);
#pragma unroll
          for (int j = 0; j < NT; ++j) {
            const uint2 bx = xu[s][j];
            mma_bf16_16816(c[j], lo[0], lo[1], lo[2], lo[3], bx.x, bx.y);
            if constexpr (kPlanes == 2) mma_bf16_16816(c[j], hi[0], hi[1], hi[2], hi[3], bx.x, bx.y);
            mma_bf16_16816(xs[j], at::kBf16PairOnes, at::kBf16PairOnes, at::kBf16PairOnes, at::kBf16PairOnes, bx.x, bx.y);
          }
          if ((step + 1) % kStepsPerGroup == 0) {
            const float4 sb = widen<ST>(cur_s[ci * kGroupsPerChunk + step / kStepsPerGroup]);
#pragma unroll
            for (int j = 0; j < NT; ++j) {
              fold<Bits>(y[j], c[j], xs[j], sb);
#pragma unroll
              for (int e = 0; e < 4; ++e) c[j][e] = xs[j][e] = 0.0f;
            }
          }
        }
      }
    }
  }

  tile_blocks::finish<NT>(y, red, seg, wtile * at::kTileRows, n);
}

// Launches depth U unless `only_if_resident` and the launch's blocks do not all fit the GPU at once.
template <int Bits, QuantScale ST, int G, int U, int NT = 1>
bool launch_depth(const __nv_bfloat16* x, int n, int64_t ldx, const TileSegments& segs, cudaStream_t stream, bool only_if_resident) {
  const auto kernel = skinny_affine_tiles_kernel<Bits, ST, G, U, NT>;
  const int64_t tiles = segs.first_tile[segs.count];
  if (only_if_resident && tiles > tile_blocks::resident_blocks(reinterpret_cast<const void*>(kernel), tile_blocks::kRedBytes<NT>)) return false;
  launch_chained(kernel, dim3(static_cast<unsigned>(tiles)), dim3(kThreads), tile_blocks::kRedBytes<NT>, stream, x, n, ldx, segs);
  return true;
}

// The deepest batch whose blocks all fit the GPU at once, else the shallowest (4-bit on an H100,
// against depth 4 at two blocks per multiprocessor everywhere: 27B q4 decode 116.5 -> 140 tok/s
// with depth 2 at four blocks for launches of several waves; 27B's ffn down, 320 tiles in one
// wave, 59% -> 78% of copy at depth 3 against 2). Depths are counted in 16-byte loads, an 8-bit
// unit being two: 4-bit units 4, 3, 2; 8-bit units 2, 1 (groups of 128, chunks of two units: 2
// only). Depths that would spill registers are not compiled: 4-bit depth 3 only for 16-bit scales
// in groups of 64, and f32 scales in groups of 32 run the shallowest depth only.
// More rows (tile_blocks::n_tiles) at the shallowest depth.
template <int Bits, QuantScale ST, int G>
void launch(const __nv_bfloat16* x, int n, int64_t ldx, const TileSegments& segs, cudaStream_t stream) {
  constexpr bool kDeep = ST != QuantScale::F32 || G != 32;
  const int nt = tile_blocks::n_tiles(n);
  if (nt == 2) {
    launch_depth<Bits, ST, G, kNTilesDepth<G>, 2>(x, n, ldx, segs, stream, false);
  } else if (nt == 4) {
    launch_depth<Bits, ST, G, kNTilesDepth<G>, 4>(x, n, ldx, segs, stream, false);
  } else if constexpr (Bits == 4) {
    if constexpr (kDeep) {
      if (launch_depth<4, ST, G, 4>(x, n, ldx, segs, stream, true)) return;
      if constexpr (ST != QuantScale::F32 && G == 64)
        if (launch_depth<4, ST, G, 3>(x, n, ldx, segs, stream, true)) return;
    }
    launch_depth<4, ST, G, 2>(x, n, ldx, segs, stream, false);
  } else if constexpr (G == 128) {
    launch_depth<8, ST, G, 2>(x, n, ldx, segs, stream, false);
  } else {
    if constexpr (kDeep)
      if (launch_depth<8, ST, G, 2>(x, n, ldx, segs, stream, true)) return;
    launch_depth<8, ST, G, 1>(x, n, ldx, segs, stream, false);
  }
}

template <int Bits, QuantScale ST>
void launch_group(int group_size, const __nv_bfloat16* x, int n, int64_t ldx, const TileSegments& segs, cudaStream_t stream) {
  switch (group_size) {
    case 32: launch<Bits, ST, 32>(x, n, ldx, segs, stream); break;
    case 64: launch<Bits, ST, 64>(x, n, ldx, segs, stream); break;
    default: launch<Bits, ST, 128>(x, n, ldx, segs, stream); break;
  }
}

template <int Bits>
void launch_scales(QuantScale scale_type, int group_size, const __nv_bfloat16* x, int n, int64_t ldx, const TileSegments& segs, cudaStream_t stream) {
  switch (scale_type) {
    case QuantScale::BF16: launch_group<Bits, QuantScale::BF16>(group_size, x, n, ldx, segs, stream); break;
    case QuantScale::F16: launch_group<Bits, QuantScale::F16>(group_size, x, n, ldx, segs, stream); break;
    case QuantScale::F32: launch_group<Bits, QuantScale::F32>(group_size, x, n, ldx, segs, stream); break;
  }
}

}  // namespace

void skinny_quant_affine_tiles(const __nv_bfloat16* x, int64_t n, int64_t ldx, std::span<const QuantSegment> segments, cudaStream_t stream) {
  if (n < 1 || n > kSkinnyQuantLaunchRows) fail("internal: ", n, " rows in one quantized launch");
  const QuantMatrix& first = segments[0].w;
  for (const QuantSegment& s : segments)
    if (!s.w.tiled || s.w.kind != first.kind || s.w.group_size != first.group_size || s.w.scale_type != first.scale_type)
      fail("internal: tiled weights of different containers, group sizes or scale types in one launch");
  const TileSegments segs = tile_blocks::segments(segments);
  if (first.kind == QuantKind::Affine8) launch_scales<8>(first.scale_type, first.group_size, x, static_cast<int>(n), ldx, segs, stream);
  else launch_scales<4>(first.scale_type, first.group_size, x, static_cast<int>(n), ldx, segs, stream);
  QWENRT_CUDA_CHECK_LAUNCH();
}

}  // namespace qwenrt::cuda
