#pragma once
// Internal to the chunked DeltaNet window (deltanet_prefill.h): the workspace layout the kernels
// share, the bf16 fragment loads they use, and their launchers (one file per kernel).
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "backend/cuda/deltanet/deltanet_decode.h"
#include "backend/cuda/deltanet/deltanet_prefill.h"
#include "backend/cuda/ptx/mma.cuh"

namespace qwenrt::cuda::deltanet_chunks {

constexpr int kC = kDeltaNetChunk;            // rows per chunk
constexpr int kD = kDeltaNetDecodeHeadDim;    // dk = dv
constexpr int K = kDeltaNetDecodeConvKernel;  // conv taps
static_assert(K == 4, "the conv below keeps the K−1 previous rows in three registers");

// Row strides (elements) of the shared-memory bf16 tiles the products read with ldmatrix: each of
// its 8×8 matrices is 16 bytes from each of 8 consecutive rows, and a row stride of 16 bytes more
// than a multiple of 128 puts those in 8 different bank groups. Every row starts 16-byte aligned.
constexpr int kLd128 = kD + 8;  // [·][128] tiles: 272 bytes
constexpr int kLd64 = kC + 8;   // [·][64] tiles: 144 bytes
// Row strides (floats) of the f32 tiles read element by element: the triangular matrices of
// `prepare`.
constexpr int kLdTri = kC + 4;

// State columns per block of the `state` kernel: 64 where that still makes at least 64 blocks
// (nv >= 32: 27B 96 blocks, 9B 64), else 32 (0.8B: 64 blocks). Blocks of 32 columns ran 27B's 192
// blocks two to a multiprocessor on 60 of them, at 3 us a chunk against 2 us alone, and loaded W
// and K twice per 64 columns (H200, 27B 8k: state 389 -> 335 us); with only 16 value heads, 32
// blocks of 64 columns carry the sequential pass on too few multiprocessors (0.8B 8k window 0.56
// -> 0.60 ms). The same products in the same order either way: the same bits.
constexpr int state_slice_columns(int nv) { return nv >= 32 ? 64 : 32; }

struct SpanMeta {
  int32_t first_row, rows, start_position, slot, first_chunk, chunks, pad0, pad1;
};
struct ChunkMeta {
  int32_t first_row, rows, span, pad;
};

// The workspace: metadata, then per-chunk intermediates, each chunk's tile contiguous. What feeds a
// product is bf16, as hi and lo where one bf16 is not precise enough (deltanet_prefill.h); U is
// only subtracted from, so it stays f32.
struct Work {
  const SpanMeta* spans;
  const ChunkMeta* chunks;
  __nv_bfloat16* qn;   // [C][nk][64][128] normalised, scaled q, rounded (hi)
  __nv_bfloat16* kn;   // [C][nk][64][128] normalised k, rounded (hi)
  __nv_bfloat16* qlo;  // [C][nk][64][128] q − hi, rounded (lo): q ≈ hi + lo to ~16 bits
  __nv_bfloat16* klo;  // [C][nk][64][128] k − hi, rounded (lo)
  uint32_t* klo_frag;  // [C][nk][4][8][32][4] the same as `state` reads it: A fragments of K_loᵀ
                       // (rows 16ks.., columns 16w..) in lane order, one 16-byte load per lane
  __nv_bfloat16* w;    // [C][nv][64][128] W = T diag(βγ) K
  float* u;            // [C][nv][64][128] U = T diag(β) V (read by `state`, then by `output`)
  float* gcum;         // [C][nv][64] cumulative log decay G_t
  __nv_bfloat16* h;    // [C][nv][128][128] the state at each chunk's start
  int32_t* ready;      // [C][nv] state slices done with the chunk (snapshot stored; for a span's last
                       // chunk, also the final state): `output` starts on a chunk at `slices`
  int32_t slices;      // kD / state_slice_columns(nv)
};

#ifdef __CUDACC__
// Fragments of mma m16n8k16 (mma.cuh) from bf16 tiles in shared memory, by ldmatrix. `tile` is the
// tile's shared address, `ld` its row stride in elements; lane l gives the address of row l%8 of
// matrix l/8, and receives (plain) row g, columns 2t..2t+1 of each matrix, or (trans) rows
// 2t..2t+1, column g; g = lane/4, t = lane%4.
__device__ __forceinline__ uint32_t smem_addr(const void* p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }
__device__ __forceinline__ uint32_t tile_at(uint32_t tile, int ld, int row, int col) { return tile + 2u * static_cast<uint32_t>(row * ld + col); }
// A of the 16×16 step at (m0, k0), A(m, k) = tile[m][k]. Matrices: (m0, k0), (m0+8, k0),
// (m0, k0+8), (m0+8, k0+8) = a0..a3.
__device__ __forceinline__ void load_a(uint32_t (&a)[4], uint32_t tile, int ld, int m0, int k0, int lane) {
  const int mi = lane / 8, mr = lane % 8;
  ldmatrix_x4(a, tile_at(tile, ld, m0 + (mi % 2) * 8 + mr, k0 + (mi / 2) * 8));
}
// A(m, k) = tile[k][m]: a stored matrix, transposed. Matrix i holds rows k0 + 8(i/2).., columns
// m0 + 8(i%2)..; transposed, lane (g, t) gets A(m0 + 8(i%2) + g, k0 + 8(i/2) + 2t..) = a_i.
__device__ __forceinline__ void load_a_t(uint32_t (&a)[4], uint32_t tile, int ld, int m0, int k0, int lane) {
  const int mi = lane / 8, mr = lane % 8;
  ldmatrix_x4_trans(a, tile_at(tile, ld, k0 + (mi / 2) * 8 + mr, m0 + (mi % 2) * 8));
}
// B of the two n-tiles n0 and n0+8 at k0, B(k, n) = tile[n][k]: b = {b0, b1} of n0, {b0, b1} of
// n0+8 (matrices at (n0, k0), (n0, k0+8), (n0+8, k0), (n0+8, k0+8)).
__device__ __forceinline__ void load_b_nk(uint32_t (&b)[4], uint32_t tile, int ld, int k0, int n0, int lane) {
  const int mi = lane / 8, mr = lane % 8;
  ldmatrix_x4(b, tile_at(tile, ld, n0 + (mi / 2) * 8 + mr, k0 + (mi % 2) * 8));
}
// The same from B(k, n) = tile[k][n], transposed (matrices at rows k0, k0+8, k0, k0+8 and columns
// n0, n0, n0+8, n0+8): lane (g, t) gets B(k0 + 8(i%2) + 2t.., n0 + 8(i/2) + g).
__device__ __forceinline__ void load_b_kn(uint32_t (&b)[4], uint32_t tile, int ld, int k0, int n0, int lane) {
  const int mi = lane / 8, mr = lane % 8;
  ldmatrix_x4_trans(b, tile_at(tile, ld, k0 + (mi % 2) * 8 + mr, n0 + (mi / 2) * 8));
}
// c0 += a·(n-tile of b[0..1]), c1 += a·(n-tile of b[2..3]).
__device__ __forceinline__ void mma_pair(float (&c0)[4], float (&c1)[4], const uint32_t (&a)[4], const uint32_t (&b)[4]) {
  mma_bf16_16816(c0, a[0], a[1], a[2], a[3], b[0], b[1]);
  mma_bf16_16816(c1, a[0], a[1], a[2], a[3], b[2], b[3]);
}
// The accumulators of n-tiles n0 and n0+8 (rows g, g+8, columns 2t..2t+1 of each) are, rounded,
// the A fragment of the 16-step k = n0..n0+15 of a following product: no trip through memory.
__device__ __forceinline__ void accumulators_to_a(uint32_t (&a)[4], const float (&c0)[4], const float (&c1)[4]) {
  a[0] = pack_bf16(c0[0], c0[1]);
  a[1] = pack_bf16(c0[2], c0[3]);
  a[2] = pack_bf16(c1[0], c1[1]);
  a[3] = pack_bf16(c1[2], c1[3]);
}

// x split for products that need more than bf16's 8 bits: x ≈ hi + lo, hi = bf16(x), lo = bf16(x − hi)
// (~16 bits). A product a·b then runs as hi·hi + lo·hi + hi·lo on the same tensor cores, f32
// accumulation; lo·lo is below f32 accumulation's own error.
__device__ __forceinline__ float bf16_hi(float x) { return __bfloat162float(__float2bfloat16_rn(x)); }
// The lo parts of two values, packed as pack_bf16 packs them.
__device__ __forceinline__ uint32_t pack_bf16_lo(float x0, float x1) { return pack_bf16(x0 - bf16_hi(x0), x1 - bf16_hi(x1)); }

// The lo parts of the same.
__device__ __forceinline__ void accumulators_to_a_lo(uint32_t (&a)[4], const float (&c0)[4], const float (&c1)[4]) {
  a[0] = pack_bf16_lo(c0[0], c0[1]);
  a[1] = pack_bf16_lo(c0[2], c0[3]);
  a[2] = pack_bf16_lo(c1[0], c1[1]);
  a[3] = pack_bf16_lo(c1[2], c1[3]);
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int m = 16; m >= 1; m /= 2) v += __shfl_xor_sync(0xffffffffu, v, m);
  return v;
}

// Copies a [rows][cols] tile (global row stride ld_src elements) into shared memory (row stride
// ld_dst), 16 bytes per copy, spread over the block's threads.
template <int kRows, int kCols, typename T>
__device__ __forceinline__ void copy_tile_async(T* dst, int ld_dst, const T* src, int64_t ld_src) {
  constexpr int kPerCopy = 16 / sizeof(T), kPerRow = kCols / kPerCopy;
  static_assert(kCols % kPerCopy == 0, "whole 16-byte pieces per row");
  for (int e = threadIdx.x; e < kRows * kPerRow; e += blockDim.x) {
    const int r = e / kPerRow, c = e % kPerRow;
    cp_async16(dst + r * ld_dst + kPerCopy * c, src + r * ld_src + kPerCopy * c);
  }
}
#endif

// The launchers, in the order deltanet_prefill runs them, are declared one header per kernel file:
// deltanet_chunk_prepare.h (`prepare`, `ring`), deltanet_chunk_state.h (`state`, with
// deltanet_chunk_state_wgmma.h) and deltanet_chunk_output.h (`output`).

}  // namespace qwenrt::cuda::deltanet_chunks
