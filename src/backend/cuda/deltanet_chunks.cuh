#pragma once
// Internal to the chunked DeltaNet window (deltanet_prefill.h): the workspace layout the kernels
// share, the tf32 fragment loads they use, and their launchers (one file per kernel).
#include <cuda_runtime_api.h>

#include <cstdint>

#include "backend/cuda/deltanet_decode.h"
#include "backend/cuda/deltanet_prefill.h"
#include "backend/cuda/mma.cuh"

namespace qwenrt::cuda::deltanet_chunks {

constexpr int kC = kDeltaNetChunk;             // rows per chunk
constexpr int kD = kDeltaNetDecodeHeadDim;     // dk = dv
constexpr int K = kDeltaNetDecodeConvKernel;   // conv taps
static_assert(K == 4, "the conv below keeps the K−1 previous rows in three registers");

constexpr int kSlice = 32;                     // state columns per block of the state kernel

// Row strides (floats) of the shared-memory tiles, chosen so the tf32 fragment loads are free of
// bank conflicts: ≡ 4 (mod 32) where a tile is read along its rows (A operands, Bᵀ), ≡ 8 where it
// is read down its columns (B operands stored k-major, transposed A).
constexpr int kLdRow = kD + 4;      // [64][128] tiles read along rows
constexpr int kLdCol = kD + 8;      // [·][128] tiles read down columns
constexpr int kLdTri = kC + 4;      // [64][64] triangular matrices (A operands)
constexpr int kLdSlice = kSlice + 8;  // [·][32] state slices and Δ slices (B operands)

struct SpanMeta {
  int32_t first_row, rows, start_position, slot, first_chunk, chunks, pad0, pad1;
};
struct ChunkMeta {
  int32_t first_row, rows, span, pad;
};

// The workspace: metadata, then per-chunk intermediates, each chunk's tile contiguous.
struct Work {
  const SpanMeta* spans;
  const ChunkMeta* chunks;
  float* qn;     // [C][nk][64][128] normalised, scaled q
  float* kn;     // [C][nk][64][128] normalised k
  float* w;      // [C][nv][64][128] W = T diag(βγ) K
  float* u;      // [C][nv][64][128] U = T diag(β) V
  float* delta;  // [C][nv][64][128] Δ = U − W S₀
  float* gcum;   // [C][nv][64] cumulative log decay G_t
  float* h;      // [C][nv][128][128] the state at each chunk's start
};

#ifdef __CUDACC__
// f32 rounded to the nearest tf32 (kept in an f32). Every tile that feeds a product is stored
// rounded once, by whoever writes it, so the fragment loads below are plain loads.
__device__ __forceinline__ float tf32(float x) { return __uint_as_float(to_tf32(x)); }
__device__ __forceinline__ float4 tf32(float4 x) { return make_float4(tf32(x.x), tf32(x.y), tf32(x.z), tf32(x.w)); }

// tf32 fragments of m16n8k8 (mma.cuh) from shared memory holding tf32-rounded values; g = lane/4,
// t = lane%4. A(m, k) = src[m·ld + k], the 16×8 tile at (m0, k0).
__device__ __forceinline__ void load_a(uint32_t (&a)[4], const float* src, int ld, int m0, int k0, int g, int t) {
  const float* p = src + (m0 + g) * ld + k0 + t;
  a[0] = __float_as_uint(p[0]);
  a[1] = __float_as_uint(p[8 * ld]);
  a[2] = __float_as_uint(p[4]);
  a[3] = __float_as_uint(p[8 * ld + 4]);
}
// A(m, k) = src[k·ld + m]: a stored matrix, transposed.
__device__ __forceinline__ void load_a_t(uint32_t (&a)[4], const float* src, int ld, int m0, int k0, int g, int t) {
  const float* p = src + (k0 + t) * ld + m0 + g;
  a[0] = __float_as_uint(p[0]);
  a[1] = __float_as_uint(p[8]);
  a[2] = __float_as_uint(p[4 * ld]);
  a[3] = __float_as_uint(p[4 * ld + 8]);
}
// B(k, n) = src[k·ld + n].
__device__ __forceinline__ void load_b_kn(uint32_t (&b)[2], const float* src, int ld, int k0, int n0, int g, int t) {
  const float* p = src + (k0 + t) * ld + n0 + g;
  b[0] = __float_as_uint(p[0]);
  b[1] = __float_as_uint(p[4 * ld]);
}
// B(k, n) = src[n·ld + k].
__device__ __forceinline__ void load_b_nk(uint32_t (&b)[2], const float* src, int ld, int k0, int n0, int g, int t) {
  const float* p = src + (n0 + g) * ld + k0 + t;
  b[0] = __float_as_uint(p[0]);
  b[1] = __float_as_uint(p[4]);
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int m = 16; m >= 1; m /= 2) v += __shfl_xor_sync(0xffffffffu, v, m);
  return v;
}

// Copies a [rows][cols] f32 tile (global row stride ld_src) into shared memory (row stride ld_dst),
// 16 bytes per copy, spread over the block's threads.
template <int kRows, int kCols>
__device__ __forceinline__ void copy_tile_async(float* dst, int ld_dst, const float* src, int64_t ld_src) {
  constexpr int kPerRow = kCols / 4;
  for (int e = threadIdx.x; e < kRows * kPerRow; e += blockDim.x) {
    const int r = e / kPerRow, c4 = e % kPerRow;
    cp_async16(dst + r * ld_dst + 4 * c4, src + r * ld_src + 4 * c4);
  }
}
#endif

// Launchers, in the order deltanet_prefill runs them: `prepare` reads the conv rings, `ring` then
// writes them, `state` carries S across chunks, `output` finishes each chunk's rows.
void launch_prepare(const DeltaNetDecodeArgs& p, const Work& work, int chunks, cudaStream_t stream);
void launch_ring(const DeltaNetDecodeArgs& p, const Work& work, int spans, cudaStream_t stream);
void launch_state(const DeltaNetDecodeArgs& p, const Work& work, int spans, cudaStream_t stream);
void launch_output(const DeltaNetDecodeArgs& p, const Work& work, int chunks, cudaStream_t stream);

}  // namespace qwenrt::cuda::deltanet_chunks
