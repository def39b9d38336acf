#include "backend/cuda/deltanet_prefill.h"

#include <algorithm>
#include <set>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/gate_math.cuh"
#include "backend/cuda/mma.cuh"

namespace qwenrt::cuda {
namespace {

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

struct WorkLayout {
  std::size_t spans = 0, chunks = 0, qn = 0, kn = 0, w = 0, u = 0, delta = 0, gcum = 0, h = 0, total = 0;
  int n_chunks = 0;
};

std::size_t align256(std::size_t n) { return (n + 255) / 256 * 256; }

WorkLayout plan(const std::vector<DeltaNetSpan>& spans, int nk, int nv) {
  WorkLayout L;
  for (const auto& s : spans) L.n_chunks += (std::max(s.rows, 0) + kC - 1) / kC;
  const std::size_t C = static_cast<std::size_t>(L.n_chunks), tile = kC * kD * sizeof(float);
  std::size_t at = 0;
  auto take = [&](std::size_t bytes) {
    const std::size_t here = at;
    at += align256(bytes);
    return here;
  };
  L.spans = take(spans.size() * sizeof(SpanMeta));
  L.chunks = take(C * sizeof(ChunkMeta));
  L.qn = take(C * nk * tile);
  L.kn = take(C * nk * tile);
  L.w = take(C * nv * tile);
  L.u = take(C * nv * tile);
  L.delta = take(C * nv * tile);
  L.gcum = take(C * nv * kC * sizeof(float));
  L.h = take(C * nv * kD * kD * sizeof(float));
  L.total = at;
  return L;
}

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

// ---------------------------------------------------------------------------------------------
// prepare: one block per (chunk, value head). Conv + SiLU of the chunk's q, k (of the key head) and
// v rows, q/k norms, gates and their cumulative sum, then L, T = (I + L)⁻¹, W and U.

constexpr int kPrepareThreads = 256;
constexpr int kConvRows = kC / (kPrepareThreads / 32);  // chunk rows per warp in the conv
struct PrepareSmem {
  alignas(16) float k[kC][kLdRow];
  alignas(16) float v[kC][kLdCol];
  alignas(16) float l[kC][kLdTri];
  alignas(16) float ti[kC][kLdTri];
  alignas(16) float partial[3 * 256];
  float beta[kC], gcum[kC];
};

// Conv + SiLU of 4 channels (chn0..chn0+3) over the kConvRows rows of warp `warp`; y[i] is chunk
// row kConvRows·w + i, zero past the chunk's end. A pre-conv row before the span comes from
// the ring (zero before position 0); the ring is only read here (ring_kernel writes it afterwards).
// All pre-conv rows are loaded before any is used, so the loads are in flight together.
__device__ __forceinline__ void conv_rows(const DeltaNetDecodeArgs& p, const SpanMeta& sp, const ChunkMeta& ch, int warp,
                                          int64_t chn0, int64_t conv_dim, float4 (&y)[kConvRows + K - 1]) {
  const int r0 = kConvRows * warp;
  const int pos0 = sp.start_position + (ch.first_row - sp.first_row) + r0;  // position of row r0
  const float* ring = p.conv_state + int64_t{sp.slot} * p.conv_slot_stride;
#pragma unroll
  for (int i = 0; i < kConvRows + K - 1; ++i) {
    const int pos = pos0 - (K - 1) + i;
    float4 x = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (r0 - (K - 1) + i < ch.rows) {
      if (pos >= sp.start_position)
        x = __ldg(reinterpret_cast<const float4*>(p.qkv + int64_t{sp.first_row + pos - sp.start_position} * p.ld_qkv + chn0));
      else if (pos >= 0)
        x = *reinterpret_cast<const float4*>(ring + (pos % K) * conv_dim + chn0);
    }
    y[i] = x;
  }
  float4 w[4];  // w[c] = the K taps of channel chn0 + c, oldest first
#pragma unroll
  for (int c = 0; c < 4; ++c) w[c] = __ldg(reinterpret_cast<const float4*>(p.conv_w) + chn0 + c);
  // In place: output row i reads pre-conv rows i..i+K−1, and overwrites row i once it is done.
#pragma unroll
  for (int i = 0; i < kConvRows; ++i) {
    const float4 a = y[i], b = y[i + 1], c = y[i + 2], d = y[i + 3];
    float4 o;
    o.x = silu(((0.0f + w[0].x * a.x) + w[0].y * b.x) + w[0].z * c.x + w[0].w * d.x);
    o.y = silu(((0.0f + w[1].x * a.y) + w[1].y * b.y) + w[1].z * c.y + w[1].w * d.y);
    o.z = silu(((0.0f + w[2].x * a.z) + w[2].y * b.z) + w[2].z * c.z + w[2].w * d.z);
    o.w = silu(((0.0f + w[3].x * a.w) + w[3].y * b.w) + w[3].z * c.w + w[3].w * d.w);
    y[i] = r0 + i < ch.rows ? o : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  }
}

// Scales kConvRows rows of 4 channels per lane to unit L2 norm over the warp's 128 channels, times
// `scale`.
__device__ __forceinline__ void l2_normalize_rows(float4 (&y)[kConvRows + K - 1], float scale) {
#pragma unroll
  for (int i = 0; i < kConvRows; ++i) {
    const float4 x = y[i];
    const float s = (1.0f / sqrtf(warp_sum(x.x * x.x + x.y * x.y + x.z * x.z + x.w * x.w) + 1e-6f)) * scale;
    y[i] = make_float4(x.x * s, x.y * s, x.z * s, x.w * s);
  }
}

__global__ void __launch_bounds__(kPrepareThreads, 2) prepare_kernel(const DeltaNetDecodeArgs p, const Work work) {
  extern __shared__ float4 smem_raw[];
  PrepareSmem& sm = *reinterpret_cast<PrepareSmem*>(smem_raw);
  const int c = blockIdx.x, hv = blockIdx.y;
  const ChunkMeta ch = work.chunks[c];
  const SpanMeta sp = work.spans[ch.span];
  const int ratio = p.nv / p.nk, hk = hv / ratio;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  const int64_t key_dim = int64_t{p.nk} * kD, conv_dim = 2 * key_dim + int64_t{p.nv} * kD;

  // q, k, v of rows kConvRows·warp.., channels 4·lane..: q normalised (and scaled) straight to the
  // workspace by the first value head of the key head, k there too and to shared memory, v to
  // shared memory.
  {
    const bool writer = hv % ratio == 0;
    const int r0 = kConvRows * warp;
    float4 y[kConvRows + K - 1];
    if (writer) {
      conv_rows(p, sp, ch, warp, hk * kD + 4 * lane, conv_dim, y);
      l2_normalize_rows(y, 1.0f / sqrtf(static_cast<float>(kD)));
      float* qn = work.qn + ((int64_t{c} * p.nk + hk) * kC + r0) * kD + 4 * lane;
#pragma unroll
      for (int i = 0; i < kConvRows; ++i) *reinterpret_cast<float4*>(qn + i * kD) = tf32(y[i]);
    }
    conv_rows(p, sp, ch, warp, key_dim + hk * kD + 4 * lane, conv_dim, y);
    l2_normalize_rows(y, 1.0f);
    float* kn = work.kn + ((int64_t{c} * p.nk + hk) * kC + r0) * kD + 4 * lane;
#pragma unroll
    for (int i = 0; i < kConvRows; ++i) {
      const float4 k = tf32(y[i]);
      *reinterpret_cast<float4*>(&sm.k[r0 + i][4 * lane]) = k;
      if (writer) *reinterpret_cast<float4*>(kn + i * kD) = k;
    }
    conv_rows(p, sp, ch, warp, 2 * key_dim + int64_t{hv} * kD + 4 * lane, conv_dim, y);
#pragma unroll
    for (int i = 0; i < kConvRows; ++i) *reinterpret_cast<float4*>(&sm.v[r0 + i][4 * lane]) = y[i];
  }
  // Gates; rows past the chunk's end get β = 0 and g = 0, so they change nothing.
  if (tid < kC) {
    float beta = 0.0f, gl = 0.0f;
    if (tid < ch.rows) {
      const int64_t row = ch.first_row + tid;
      beta = sigmoid(p.b[row * p.ld_ba + hv]);
      gl = p.neg_exp_a[hv] * softplus(p.a[row * p.ld_ba + hv] + p.dt_bias[hv]);
    }
    sm.beta[tid] = beta;
    sm.gcum[tid] = gl;
  }
  __syncthreads();

  // Cumulative sum of the log decays (warp 0, two rows per lane).
  if (warp == 0) {
    const float g0 = sm.gcum[2 * lane], g1 = sm.gcum[2 * lane + 1];
    float s = g0 + g1;
#pragma unroll
    for (int off = 1; off < 32; off *= 2) {
      const float n = __shfl_up_sync(0xffffffffu, s, off);
      if (lane >= off) s += n;
    }
    const float before = s - (g0 + g1);
    sm.gcum[2 * lane] = before + g0;
    sm.gcum[2 * lane + 1] = before + g0 + g1;
  }
  __syncthreads();
  if (tid < kC) work.gcum[(int64_t{c} * p.nv + hv) * kC + tid] = sm.gcum[tid];

  // L = β_t (k_t·k_s) e^{G_t−G_s} below the diagonal. Warp w: rows 16(w%4).., columns 32(w/4)..
  // (tiles wholly above the diagonal are skipped).
  {
    const int rb = warp % 4, cb = warp / 4;
    float acc[4][4] = {};
    for (int k0 = 0; k0 < kD; k0 += 8) {
      uint32_t a[4];
      load_a(a, &sm.k[0][0], kLdRow, 16 * rb, k0, g, t);
#pragma unroll
      for (int n = 0; n < 4; ++n) {
        if (32 * cb + 8 * n < 16 * (rb + 1)) {
          uint32_t b[2];
          load_b_nk(b, &sm.k[0][0], kLdRow, k0, 32 * cb + 8 * n, g, t);
          mma_tf32_1688(acc[n], a, b);
        }
      }
    }
#pragma unroll
    for (int n = 0; n < 4; ++n)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int row = 16 * rb + g + (i >= 2 ? 8 : 0), col = 32 * cb + 8 * n + 2 * t + (i & 1);
        sm.l[row][col] = row > col ? sm.beta[row] * acc[n][i] * expf(sm.gcum[row] - sm.gcum[col]) : 0.0f;
      }
  }
  __syncthreads();

  // T = (I + L)⁻¹ by 16×16 blocks. Diagonal blocks: forward substitution, a column per thread.
  if (tid < 64) {
    const int o = 16 * (tid / 16), col = tid % 16;
    float x[16];
#pragma unroll
    for (int r = 0; r < 16; ++r) {
      float s = r == col ? 1.0f : 0.0f;
#pragma unroll
      for (int j = 0; j < r; ++j) s -= sm.l[o + r][o + j] * x[j];
      x[r] = r < col ? 0.0f : s;
      sm.ti[o + r][o + col] = x[r];
    }
  } else {
    for (int e = tid - 64; e < kC * kC; e += kPrepareThreads - 64) {
      const int r = e / kC, col = e % kC;
      if (r / 16 < col / 16) sm.ti[r][col] = 0.0f;
    }
  }
  __syncthreads();
  // Below the diagonal, block row by block row: T_ij = −T_ii Σ_{k=j}^{i−1} L_ik T_kj. A thread
  // takes elements (r, col) of the 16×16 blocks; every loop bound is a constant, so the shared
  // loads of a sum are all in flight together.
  float* partial = sm.partial;
#pragma unroll
  for (int bi = 1; bi < 4; ++bi) {
#pragma unroll
    for (int e = tid; e < 256; e += kPrepareThreads) {
      const int r = e / 16, col = e % 16;
#pragma unroll
      for (int bj = 0; bj < bi; ++bj) {
        float s = 0.0f;
#pragma unroll
        for (int kk = 16 * bj; kk < 16 * bi; ++kk) s += sm.l[16 * bi + r][kk] * sm.ti[kk][16 * bj + col];
        partial[bj * 256 + e] = s;
      }
    }
    __syncthreads();
#pragma unroll
    for (int e = tid; e < 256; e += kPrepareThreads) {
      const int r = e / 16, col = e % 16;
#pragma unroll
      for (int bj = 0; bj < bi; ++bj) {
        float s = 0.0f;
#pragma unroll
        for (int m = 0; m < 16; ++m) s += sm.ti[16 * bi + r][16 * bi + m] * partial[bj * 256 + m * 16 + col];
        sm.ti[16 * bi + r][16 * bj + col] = -s;
      }
    }
    __syncthreads();
  }

  // X = diag(βγ) K and Y = diag(β) V in place, T rounded for the products; then W = T X and
  // U = T Y (T is lower triangular: warp w needs k < 16(w+1)).
  for (int e = tid; e < kC * kD / 4; e += kPrepareThreads) {
    const int r = e / (kD / 4), c4 = e % (kD / 4);
    const float bk = sm.beta[r] * expf(sm.gcum[r]), bv = sm.beta[r];
    float4& k4 = *reinterpret_cast<float4*>(&sm.k[r][4 * c4]);
    float4& v4 = *reinterpret_cast<float4*>(&sm.v[r][4 * c4]);
    k4 = tf32(make_float4(k4.x * bk, k4.y * bk, k4.z * bk, k4.w * bk));
    v4 = tf32(make_float4(v4.x * bv, v4.y * bv, v4.z * bv, v4.w * bv));
  }
  for (int e = tid; e < kC * kC; e += kPrepareThreads) sm.ti[e / kC][e % kC] = tf32(sm.ti[e / kC][e % kC]);
  __syncthreads();
  // Warp w: rows 16(w%4).., columns 64(w/4)...
  const int rb = warp % 4, cb = warp / 4;
#pragma unroll 1
  for (int which = 0; which < 2; ++which) {
    const float* src = which == 0 ? &sm.k[0][0] : &sm.v[0][0];
    const int ld = which == 0 ? kLdRow : kLdCol;
    float* dst = (which == 0 ? work.w : work.u) + (int64_t{c} * p.nv + hv) * kC * kD;
    const bool round = which == 0;  // W feeds a product in `state`; U is only subtracted from
    float acc[8][4] = {};
    for (int ks = 0; ks < 2 * (rb + 1); ++ks) {
      uint32_t a[4];
      load_a(a, &sm.ti[0][0], kLdTri, 16 * rb, 8 * ks, g, t);
#pragma unroll
      for (int n = 0; n < 8; ++n) {
        uint32_t b[2];
        load_b_kn(b, src, ld, 8 * ks, 64 * cb + 8 * n, g, t);
        mma_tf32_1688(acc[n], a, b);
      }
    }
    const int row = 16 * rb + g;
#pragma unroll
    for (int n = 0; n < 8; ++n) {
      const int col = 64 * cb + 8 * n + 2 * t;
      auto r = [&](float x) { return round ? tf32(x) : x; };
      *reinterpret_cast<float2*>(dst + row * kD + col) = make_float2(r(acc[n][0]), r(acc[n][1]));
      *reinterpret_cast<float2*>(dst + (row + 8) * kD + col) = make_float2(r(acc[n][2]), r(acc[n][3]));
    }
  }
}

// ---------------------------------------------------------------------------------------------
// state: one block per (32 state columns, value head, span), walking the span's chunks in order.
// The block's 128×32 slice of S lives in the warps' accumulators (warp w: rows 16w..16w+15).

constexpr int kStateThreads = 256;
struct StateSmem {
  alignas(16) float w[kC][kLdRow];
  alignas(16) float k[kC][kLdCol];
  alignas(16) float u[kC][kLdSlice];
  alignas(16) float h[kD][kLdSlice];
  alignas(16) float d[kC][kLdSlice];
  alignas(16) float gcum[kC];
};

__global__ void __launch_bounds__(kStateThreads, 2) state_kernel(const DeltaNetDecodeArgs p, const Work work) {
  extern __shared__ float4 smem_raw[];
  StateSmem& sm = *reinterpret_cast<StateSmem*>(smem_raw);
  const int j0 = blockIdx.x * kSlice, hv = blockIdx.y;
  const SpanMeta sp = work.spans[blockIdx.z];
  const int hk = hv / (p.nv / p.nk);
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  float* state = p.rec_state + int64_t{sp.slot} * p.rec_slot_stride + int64_t{hv} * kD * kD;

  // s[nt]: rows 16w + g (+8), columns j0 + 8nt + 2t (+1).
  const int srow = 16 * warp + g;
  float s[4][4];
#pragma unroll
  for (int nt = 0; nt < 4; ++nt) {
    const int col = j0 + 8 * nt + 2 * t;
    const float2 lo = *reinterpret_cast<const float2*>(state + srow * kD + col);
    const float2 hi = *reinterpret_cast<const float2*>(state + (srow + 8) * kD + col);
    s[nt][0] = lo.x;
    s[nt][1] = lo.y;
    s[nt][2] = hi.x;
    s[nt][3] = hi.y;
  }

  // Loads run one step ahead: W, U and G of chunk c+1 (group "WUG") while S is updated with chunk
  // c's K; K of chunk c+1 (group "K") while chunk c+1's Δ is computed. cp.async groups complete in
  // commit order, so "wait until one group is pending" waits for the older of the two.
  auto load_wug = [&](int64_t c) {
    const int64_t head_tile = (c * p.nv + hv) * kC * kD;
    copy_tile_async<kC, kD>(&sm.w[0][0], kLdRow, work.w + head_tile, kD);
    copy_tile_async<kC, kSlice>(&sm.u[0][0], kLdSlice, work.u + head_tile + j0, kD);
    if (tid < kC / 4) cp_async16(&sm.gcum[4 * tid], work.gcum + (c * p.nv + hv) * kC + 4 * tid);
    cp_async_commit();
  };
  auto load_k = [&](int64_t c) {
    copy_tile_async<kC, kD>(&sm.k[0][0], kLdCol, work.kn + (c * p.nk + hk) * kC * kD, kD);
    cp_async_commit();
  };
  if (sp.chunks > 0) {
    load_wug(sp.first_chunk);
    load_k(sp.first_chunk);
  }
  for (int ci = 0; ci < sp.chunks; ++ci) {
    const int64_t c = sp.first_chunk + ci, head_tile = (c * p.nv + hv) * kC * kD;
    // S₀ of this chunk, rounded: to shared memory for Δ and to the workspace for `output`.
    float* snapshot = work.h + (c * p.nv + hv) * kD * kD;
#pragma unroll
    for (int nt = 0; nt < 4; ++nt) {
      const int col = 8 * nt + 2 * t;
      const float2 lo = make_float2(tf32(s[nt][0]), tf32(s[nt][1])), hi = make_float2(tf32(s[nt][2]), tf32(s[nt][3]));
      *reinterpret_cast<float2*>(&sm.h[srow][col]) = lo;
      *reinterpret_cast<float2*>(&sm.h[srow + 8][col]) = hi;
      *reinterpret_cast<float2*>(snapshot + srow * kD + j0 + col) = lo;
      *reinterpret_cast<float2*>(snapshot + (srow + 8) * kD + j0 + col) = hi;
    }
    cp_async_wait<1>();  // this chunk's W, U, G (its K may still be in flight)
    __syncthreads();
    const float g_last = sm.gcum[kC - 1], gamma = expf(g_last);

    // Δ = U − W S₀; warp w: rows 16(w%4).., columns 16(w/4)... To the workspace as is (for
    // `output`), to shared memory times e^{G_C−G_t} (the state update's row weights).
    {
      const int m0 = 16 * (warp % 4), n0 = 16 * (warp / 4);
      float acc[2][4] = {};
#pragma unroll 4
      for (int k0 = 0; k0 < kD; k0 += 8) {
        uint32_t a[4];
        load_a(a, &sm.w[0][0], kLdRow, m0, k0, g, t);
#pragma unroll
        for (int nt = 0; nt < 2; ++nt) {
          uint32_t b[2];
          load_b_kn(b, &sm.h[0][0], kLdSlice, k0, n0 + 8 * nt, g, t);
          mma_tf32_1688(acc[nt], a, b);
        }
      }
      float* delta = work.delta + head_tile + j0;
      const int row = m0 + g;
      const float w0 = expf(g_last - sm.gcum[row]), w1 = expf(g_last - sm.gcum[row + 8]);
#pragma unroll
      for (int nt = 0; nt < 2; ++nt) {
        const int col = n0 + 8 * nt + 2 * t;
        const float2 lo = make_float2(sm.u[row][col] - acc[nt][0], sm.u[row][col + 1] - acc[nt][1]);
        const float2 hi = make_float2(sm.u[row + 8][col] - acc[nt][2], sm.u[row + 8][col + 1] - acc[nt][3]);
        *reinterpret_cast<float2*>(&sm.d[row][col]) = make_float2(tf32(lo.x * w0), tf32(lo.y * w0));
        *reinterpret_cast<float2*>(&sm.d[row + 8][col]) = make_float2(tf32(hi.x * w1), tf32(hi.y * w1));
        *reinterpret_cast<float2*>(delta + row * kD + col) = make_float2(tf32(lo.x), tf32(lo.y));
        *reinterpret_cast<float2*>(delta + (row + 8) * kD + col) = make_float2(tf32(hi.x), tf32(hi.y));
      }
    }
    cp_async_wait<0>();  // this chunk's K
    __syncthreads();     // weighted Δ visible; W, U, G free
    if (ci + 1 < sp.chunks) load_wug(c + 1);

    // S = γ_C S₀ + Kᵀ diag(e^{G_C−G_t}) Δ.
#pragma unroll
    for (int nt = 0; nt < 4; ++nt)
#pragma unroll
      for (int i = 0; i < 4; ++i) s[nt][i] *= gamma;
#pragma unroll 4
    for (int k0 = 0; k0 < kC; k0 += 8) {
      uint32_t a[4];
      load_a_t(a, &sm.k[0][0], kLdCol, 16 * warp, k0, g, t);
#pragma unroll
      for (int nt = 0; nt < 4; ++nt) {
        uint32_t b[2];
        load_b_kn(b, &sm.d[0][0], kLdSlice, k0, 8 * nt, g, t);
        mma_tf32_1688(s[nt], a, b);
      }
    }
    __syncthreads();  // K, Δ and the S₀ tile free
    if (ci + 1 < sp.chunks) load_k(c + 1);
  }

#pragma unroll
  for (int nt = 0; nt < 4; ++nt) {
    const int col = j0 + 8 * nt + 2 * t;
    *reinterpret_cast<float2*>(state + srow * kD + col) = make_float2(s[nt][0], s[nt][1]);
    *reinterpret_cast<float2*>(state + (srow + 8) * kD + col) = make_float2(s[nt][2], s[nt][3]);
  }
}

// ---------------------------------------------------------------------------------------------
// output: one block per (chunk, value head). P = (Q Kᵀ) ⊙ e^{G_t−G_s} on and below the diagonal,
// O = diag(γ) Q S₀ + P Δ, then the gated RMSNorm, to bf16. Warp w: rows 16(w%4).., columns of P
// 32(w/4).., columns of O 64(w/4)...

constexpr int kOutputThreads = 256;
// Shared memory over time, 103 KiB (two blocks per multiprocessor): Q, K and Δ arrive first. Each
// warp then keeps its Q rows as fragments in registers, which frees Q's tile for S₀: its rows
// 0..63 arrive while P = Q Kᵀ is computed, its rows 64..127 while P Δ is; P takes K's tile.
struct OutputSmem {
  alignas(16) float qs[kC][kLdCol];  // Q, then S₀ rows 0..63, then S₀ rows 64..127
  alignas(16) float k[kC][kLdRow];   // K, then P (row stride kLdTri)
  alignas(16) float d[kC][kLdCol];
  alignas(16) float gcum[kC];
  float row_ss[2][kC];
};

__global__ void __launch_bounds__(kOutputThreads, 2) output_kernel(const DeltaNetDecodeArgs p, const Work work) {
  extern __shared__ float4 smem_raw[];
  OutputSmem& sm = *reinterpret_cast<OutputSmem*>(smem_raw);
  const int64_t c = blockIdx.x;
  const int hv = blockIdx.y;
  const ChunkMeta ch = work.chunks[c];
  const int hk = hv / (p.nv / p.nk);
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  const int rb = warp % 4, cb = warp / 4;  // rows 16rb.., P columns 32cb.., O columns 64cb..

  const int64_t head_tile = (c * p.nv + hv) * kC * kD;
  const float* s0 = work.h + (c * p.nv + hv) * kD * kD;
  copy_tile_async<kC, kD>(&sm.qs[0][0], kLdCol, work.qn + (c * p.nk + hk) * kC * kD, kD);
  copy_tile_async<kC, kD>(&sm.k[0][0], kLdRow, work.kn + (c * p.nk + hk) * kC * kD, kD);
  if (tid < kC / 4) cp_async16(&sm.gcum[4 * tid], work.gcum + (c * p.nv + hv) * kC + 4 * tid);
  cp_async_commit();
  copy_tile_async<kC, kD>(&sm.d[0][0], kLdCol, work.delta + head_tile, kD);
  cp_async_commit();
  cp_async_wait<1>();
  __syncthreads();

  uint32_t qf[kD / 8][4];  // A fragments of this warp's 16 Q rows, k-step by k-step
#pragma unroll
  for (int ks = 0; ks < kD / 8; ++ks) load_a(qf[ks], &sm.qs[0][0], kLdCol, 16 * rb, 8 * ks, g, t);
  __syncthreads();  // every warp holds its Q: the tile takes S₀ rows 0..63
  copy_tile_async<kC, kD>(&sm.qs[0][0], kLdCol, s0, kD);
  cp_async_commit();

  float* pm = &sm.k[0][0];  // P, row stride kLdTri, once K is no longer read
  {
    float acc[4][4] = {};
    if (32 * cb <= 16 * rb + 15) {  // else the whole 16×32 tile is above the diagonal
#pragma unroll
      for (int ks = 0; ks < kD / 8; ++ks)
#pragma unroll
        for (int nt = 0; nt < 4; ++nt) {
          uint32_t b[2];
          load_b_nk(b, &sm.k[0][0], kLdRow, 8 * ks, 32 * cb + 8 * nt, g, t);
          mma_tf32_1688(acc[nt], qf[ks], b);
        }
    }
    __syncthreads();  // every warp is done with K
#pragma unroll
    for (int nt = 0; nt < 4; ++nt)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int row = 16 * rb + g + (i >= 2 ? 8 : 0), col = 32 * cb + 8 * nt + 2 * t + (i & 1);
        pm[row * kLdTri + col] = col <= row ? tf32(acc[nt][i] * expf(sm.gcum[row] - sm.gcum[col])) : 0.0f;
      }
  }
  cp_async_wait<0>();  // Δ and S₀ rows 0..63
  __syncthreads();

  // o = Q S₀ (two halves of k), scaled by γ per row; o2 = P Δ, computed while the second half loads.
  float o[8][4] = {};
#pragma unroll
  for (int ks = 0; ks < kD / 16; ++ks)
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) {
      uint32_t b[2];
      load_b_kn(b, &sm.qs[0][0], kLdCol, 8 * ks, 64 * cb + 8 * nt, g, t);
      mma_tf32_1688(o[nt], qf[ks], b);
    }
  __syncthreads();  // S₀ rows 0..63 done with
  copy_tile_async<kC, kD>(&sm.qs[0][0], kLdCol, s0 + kC * kD, kD);
  cp_async_commit();
  float o2[8][4] = {};
  for (int ks = 0; ks < 2 * (rb + 1); ++ks) {
    uint32_t a[4];
    load_a(a, pm, kLdTri, 16 * rb, 8 * ks, g, t);
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) {
      uint32_t b[2];
      load_b_kn(b, &sm.d[0][0], kLdCol, 8 * ks, 64 * cb + 8 * nt, g, t);
      mma_tf32_1688(o2[nt], a, b);
    }
  }
  cp_async_wait<0>();
  __syncthreads();
#pragma unroll
  for (int ks = kD / 16; ks < kD / 8; ++ks)
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) {
      uint32_t b[2];
      load_b_kn(b, &sm.qs[0][0], kLdCol, 8 * ks - kC, 64 * cb + 8 * nt, g, t);
      mma_tf32_1688(o[nt], qf[ks], b);
    }
  const int row0 = 16 * rb + g, row1 = row0 + 8;
  const float e0 = expf(sm.gcum[row0]), e1 = expf(sm.gcum[row1]);
#pragma unroll
  for (int nt = 0; nt < 8; ++nt) {
    o[nt][0] = o[nt][0] * e0 + o2[nt][0];
    o[nt][1] = o[nt][1] * e0 + o2[nt][1];
    o[nt][2] = o[nt][2] * e1 + o2[nt][2];
    o[nt][3] = o[nt][3] * e1 + o2[nt][3];
  }

  // Gated RMSNorm over the head's 128 columns: quad sums, then the two column halves' warps.
  float ss0 = 0.0f, ss1 = 0.0f;
#pragma unroll
  for (int nt = 0; nt < 8; ++nt) {
    ss0 += o[nt][0] * o[nt][0] + o[nt][1] * o[nt][1];
    ss1 += o[nt][2] * o[nt][2] + o[nt][3] * o[nt][3];
  }
#pragma unroll
  for (int m = 1; m <= 2; m *= 2) {
    ss0 += __shfl_xor_sync(0xffffffffu, ss0, m);
    ss1 += __shfl_xor_sync(0xffffffffu, ss1, m);
  }
  if (t == 0) {
    sm.row_ss[cb][row0] = ss0;
    sm.row_ss[cb][row1] = ss1;
  }
  __syncthreads();
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int row = half == 0 ? row0 : row1;
    if (row >= ch.rows) continue;
    const float inv = 1.0f / sqrtf((sm.row_ss[0][row] + sm.row_ss[1][row]) / static_cast<float>(kD) + p.eps);
    const int64_t R = ch.first_row + row;
    const float* z = p.z + R * p.ld_z + int64_t{hv} * kD;
    __nv_bfloat16* y = p.out + R * p.ld_out + int64_t{hv} * kD;
#pragma unroll
    for (int nt = 0; nt < 8; ++nt)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int col = 64 * cb + 8 * nt + 2 * t + e;
        y[col] = __float2bfloat16_rn(o[nt][2 * half + e] * inv * p.norm_w[col] * silu(z[col]));
      }
  }
}

// ---------------------------------------------------------------------------------------------
// ring: after `prepare` has read the rings, each span leaves its last K pre-conv rows in its ring
// (ring row = position mod K), as K decode steps would have. A block per (span, ring row).
__global__ void ring_kernel(const DeltaNetDecodeArgs p, const Work work) {
  const SpanMeta sp = work.spans[blockIdx.x];
  const int pos = sp.start_position + sp.rows - K + static_cast<int>(blockIdx.y);  // the last K positions
  if (pos < sp.start_position) return;  // before the span: the ring already holds it
  const int64_t conv_dim = 2 * int64_t{p.nk} * kD + int64_t{p.nv} * kD;
  const float4* src = reinterpret_cast<const float4*>(p.qkv + int64_t{sp.first_row + pos - sp.start_position} * p.ld_qkv);
  float4* dst = reinterpret_cast<float4*>(p.conv_state + int64_t{sp.slot} * p.conv_slot_stride + (pos % K) * conv_dim);
  for (int64_t i = threadIdx.x; i < conv_dim / 4; i += blockDim.x) dst[i] = src[i];
}

template <typename Kernel>
void set_smem(Kernel kernel, std::size_t bytes) {
  QWENRT_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
}

}  // namespace

std::size_t deltanet_prefill_workspace_bytes(const std::vector<DeltaNetSpan>& spans, int nk, int nv) {
  return plan(spans, nk, nv).total;
}

DeltaNetWindow plan_deltanet_window(const std::vector<DeltaNetSpan>& spans, int nk, int nv, void* workspace,
                                    std::size_t workspace_bytes, cudaStream_t stream) {
  if (spans.empty() || spans.size() > 65535) fail("deltanet_prefill: ", spans.size(), " spans; it takes 1 to 65535");
  std::set<int32_t> slots;
  for (const auto& s : spans) {
    if (s.rows < 1 || s.first_row < 0 || s.start_position < 0 || s.slot < 0 || int64_t{s.start_position} + s.rows > INT32_MAX)
      fail("deltanet_prefill: bad span (first row ", s.first_row, ", ", s.rows, " rows, start position ", s.start_position, ", slot ",
           s.slot, ")");
    if (!slots.insert(s.slot).second) fail("deltanet_prefill: two spans share cache slot ", s.slot);
  }
  if (nk < 1 || nv < 1) fail("deltanet_prefill: ", nk, " key heads and ", nv, " value heads");
  const WorkLayout L = plan(spans, nk, nv);
  if (!workspace || workspace_bytes < L.total)
    fail("deltanet_prefill: workspace of ", workspace_bytes, " bytes; the window needs ", L.total);
  if (reinterpret_cast<uintptr_t>(workspace) % 256 != 0) fail("deltanet_prefill: the workspace must be 256-byte aligned");

  std::vector<SpanMeta> span_meta;
  std::vector<ChunkMeta> chunk_meta;
  for (std::size_t i = 0; i < spans.size(); ++i) {
    const DeltaNetSpan& s = spans[i];
    const int first_chunk = static_cast<int>(chunk_meta.size());
    for (int r = 0; r < s.rows; r += kC) chunk_meta.push_back({s.first_row + r, std::min(kC, s.rows - r), static_cast<int32_t>(i), 0});
    span_meta.push_back({s.first_row, s.rows, s.start_position, s.slot, first_chunk, static_cast<int32_t>(chunk_meta.size()) - first_chunk, 0, 0});
  }
  auto* base = static_cast<std::byte*>(workspace);
  QWENRT_CUDA_CHECK(cudaMemcpyAsync(base + L.spans, span_meta.data(), span_meta.size() * sizeof(SpanMeta), cudaMemcpyHostToDevice, stream));
  QWENRT_CUDA_CHECK(cudaMemcpyAsync(base + L.chunks, chunk_meta.data(), chunk_meta.size() * sizeof(ChunkMeta), cudaMemcpyHostToDevice, stream));
  return {spans, workspace, nk, nv, L.n_chunks};
}

void deltanet_prefill(const DeltaNetDecodeArgs& a, const DeltaNetWindow& window, cudaStream_t stream) {
  if (a.dk != kD || a.dv != kD)
    fail("deltanet_prefill: head dims dk ", a.dk, ", dv ", a.dv, " are not supported; the kernels are built for dk = dv = ", kD);
  if (a.nk < 1 || a.nv < 1 || a.nv % a.nk != 0 || a.nv > 65535)
    fail("deltanet_prefill: ", a.nv, " value heads over ", a.nk, " key heads; needs nk >= 1 and nv a multiple of nk");
  if (a.nk != window.nk || a.nv != window.nv)
    fail("deltanet_prefill: the window was planned for ", window.nk, "/", window.nv, " heads, the layer has ", a.nk, "/", a.nv);
  if (a.K != K) fail("deltanet_prefill: conv kernel size ", a.K, " is not supported; the kernels are built for K = ", K);
  if (!a.qkv || !a.z || !a.b || !a.a || !a.conv_w || !a.neg_exp_a || !a.dt_bias || !a.norm_w || !a.conv_state ||
      !a.rec_state || !a.out || !window.workspace)
    fail("deltanet_prefill: a null pointer among the arguments");
  const int64_t key_dim = int64_t{a.nk} * kD, value_dim = int64_t{a.nv} * kD, conv_dim = 2 * key_dim + value_dim;
  if (a.ld_qkv < conv_dim || a.ld_z < value_dim || a.ld_ba < a.nv || a.ld_out < value_dim)
    fail("deltanet_prefill: row strides qkv ", a.ld_qkv, ", z ", a.ld_z, ", b/a ", a.ld_ba, ", out ", a.ld_out,
         " must be at least conv_dim ", conv_dim, ", value_dim ", value_dim, ", nv ", a.nv, ", value_dim ", value_dim);
  if (a.conv_slot_stride < K * conv_dim)
    fail("deltanet_prefill: conv slot stride ", a.conv_slot_stride, " is less than K x conv_dim = ", K * conv_dim);
  // The conv moves 4 channels at a time.
  auto aligned16 = [](const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; };
  if (!aligned16(a.qkv) || !aligned16(a.conv_state) || !aligned16(a.conv_w) || a.ld_qkv % 4 != 0 || a.conv_slot_stride % 4 != 0)
    fail("deltanet_prefill: qkv, the conv rings and the conv weights need 16-byte alignment, the qkv row stride (", a.ld_qkv,
         ") and the conv slot stride (", a.conv_slot_stride, ") multiples of 4");
  if (a.rec_slot_stride < value_dim * kD || a.rec_slot_stride % 4 != 0 || reinterpret_cast<uintptr_t>(a.rec_state) % 16 != 0)
    fail("deltanet_prefill: recurrent state needs 16-byte alignment and a slot stride that is a multiple of 4 and at least nv x dk x dv = ",
         value_dim * kD, " (got ", a.rec_slot_stride, ")");
  if (!(a.eps >= 0)) fail("deltanet_prefill: eps ", a.eps, " must be >= 0");

  const WorkLayout L = plan(window.spans, a.nk, a.nv);
  auto* base = static_cast<std::byte*>(window.workspace);
  Work w;
  w.spans = reinterpret_cast<const SpanMeta*>(base + L.spans);
  w.chunks = reinterpret_cast<const ChunkMeta*>(base + L.chunks);
  w.qn = reinterpret_cast<float*>(base + L.qn);
  w.kn = reinterpret_cast<float*>(base + L.kn);
  w.w = reinterpret_cast<float*>(base + L.w);
  w.u = reinterpret_cast<float*>(base + L.u);
  w.delta = reinterpret_cast<float*>(base + L.delta);
  w.gcum = reinterpret_cast<float*>(base + L.gcum);
  w.h = reinterpret_cast<float*>(base + L.h);
  const int C = L.n_chunks, S = static_cast<int>(window.spans.size());

  set_smem(prepare_kernel, sizeof(PrepareSmem));
  set_smem(state_kernel, sizeof(StateSmem));
  set_smem(output_kernel, sizeof(OutputSmem));
  prepare_kernel<<<dim3(C, a.nv), kPrepareThreads, sizeof(PrepareSmem), stream>>>(a, w);
  QWENRT_CUDA_CHECK_LAUNCH();
  ring_kernel<<<dim3(S, K), 256, 0, stream>>>(a, w);
  QWENRT_CUDA_CHECK_LAUNCH();
  state_kernel<<<dim3(kD / kSlice, a.nv, S), kStateThreads, sizeof(StateSmem), stream>>>(a, w);
  QWENRT_CUDA_CHECK_LAUNCH();
  output_kernel<<<dim3(C, a.nv), kOutputThreads, sizeof(OutputSmem), stream>>>(a, w);
  QWENRT_CUDA_CHECK_LAUNCH();
}

}  // namespace qwenrt::cuda
