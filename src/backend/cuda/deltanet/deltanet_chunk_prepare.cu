// The `prepare` and `ring` kernels of the chunked DeltaNet window (deltanet_prefill.h).
#include "backend/cuda/deltanet/deltanet_chunk_prepare.h"
#include "backend/cuda/deltanet/deltanet_chunks.cuh"
#include "backend/cuda/ptx/gate_math.cuh"
#include "backend/cuda/runtime/cuda_check.h"

namespace qwenrt::cuda::deltanet_chunks {
namespace {

// prepare: one block per (chunk, key head). Conv + SiLU of the chunk's q and k rows and their norms,
// once for all the key head's value heads (a block per value head made k's conv three times over
// at 27B shapes); then per value head the gates and their cumulative sum, L, T = (I + L)⁻¹, the v
// rows, U and W.

constexpr int kPrepareThreads = 256;
constexpr int kPrepareBlocksPerSm = 2;
constexpr int kConvRows = kC / (kPrepareThreads / 32);  // chunk rows per warp in the conv
constexpr int kLdPartial = 16 + 4;                      // floats: B fragments read from it without bank conflicts
// A value head makes L and T first, then Y in their place: L and T are dead once T is rounded, and Y
// is only needed from U on. The room this leaves at two blocks per multiprocessor holds the next
// value head's pre-conv v rows, copied in while the current head is worked on.
struct PrepareSmem {
  alignas(16) __nv_bfloat16 k[kC][kLd128];  // K, kept for every value head of the block
  union {
    struct {
      alignas(16) float l[kC][kLdTri];   // L, f32
      alignas(16) float ti[kC][kLdTri];  // T = (I + L)⁻¹, f32
    } tri;
    struct {
      alignas(16) __nv_bfloat16 v[kC][kLd128];    // Y = diag(β) V, hi; then X = diag(βγ) K
      alignas(16) __nv_bfloat16 vlo[kC][kLd128];  // Y, lo; then W, staged for 16-byte stores
    } y;
    alignas(16) uint32_t frag[kC * kD / 2];  // at the start: K_lo's fragments, staged likewise
  };
  alignas(16) float v_rows[kC + K - 1][kD];      // a value head's pre-conv v rows, copied in ahead
  alignas(16) __nv_bfloat16 tb[kC][kLd64];       // T rounded for the products
  alignas(16) float partial[3][16][kLdPartial];  // T's block rows: Σ L_ik T_kj of blocks j < i
  float beta[kC], gcum[kC];
};
static_assert(sizeof(PrepareSmem) <= 113 * 1024, "two blocks per multiprocessor (228 KiB, 1 KiB each reserved)");

// Where pre-conv row r of the chunk (−(K − 1) <= r < kC) comes from: the span's qkv row, the ring
// before the span (ring row = position mod K), or nowhere (zero: past the chunk's end, or before
// position 0). The ring is only read in this kernel (ring_kernel writes it afterwards).
__device__ __forceinline__ const float* pre_conv_row(const DeltaNetDecodeArgs& p, const SpanMeta& sp, const ChunkMeta& ch, int r, int64_t conv_dim) {
  if (r >= ch.rows) return nullptr;
  if (ch.first_row + r >= sp.first_row) return p.qkv + int64_t{ch.first_row + r} * p.ld_qkv;
  const int pos = sp.start_position + (ch.first_row + r - sp.first_row);
  return pos >= 0 ? p.conv_state + int64_t{sp.slot} * p.conv_slot_stride + (pos % K) * conv_dim : nullptr;
}

// The pre-conv rows of 4 channels (chn0..chn0+3) that warp `warp` convolves: x[i] is chunk row
// kConvRows·w + i − (K − 1). All are requested before any is used, so the loads are in flight
// together.
__device__ __forceinline__ void conv_load(const DeltaNetDecodeArgs& p, const SpanMeta& sp, const ChunkMeta& ch, int warp, int64_t chn0,
                                          int64_t conv_dim, float4 (&x)[kConvRows + K - 1]) {
#pragma unroll
  for (int i = 0; i < kConvRows + K - 1; ++i) {
    const float* row = pre_conv_row(p, sp, ch, kConvRows * warp - (K - 1) + i, conv_dim);
    x[i] = row ? __ldg(reinterpret_cast<const float4*>(row + chn0)) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  }
}

// The same rows for all 128 channels of value head hv, as asynchronous copies into `rows` (row j is
// chunk row j − (K − 1)), one commit group.
__device__ __forceinline__ void request_v_rows(const DeltaNetDecodeArgs& p, const SpanMeta& sp, const ChunkMeta& ch, int hv, int64_t key_dim,
                                               int64_t conv_dim, float (&rows)[kC + K - 1][kD]) {
  const int64_t chn0 = 2 * key_dim + int64_t{hv} * kD;
  constexpr int kPieces = kD / 4;  // 16-byte pieces per row
  for (int e = threadIdx.x; e < (kC + K - 1) * kPieces; e += blockDim.x) {
    const int j = e / kPieces, c4 = 4 * (e % kPieces);
    const float* row = pre_conv_row(p, sp, ch, j - (K - 1), conv_dim);
    cp_async16(smem_addr(&rows[j][c4]), row ? row + chn0 + c4 : p.qkv, row != nullptr);  // zeros where there is no row
  }
  cp_async_commit();
}

// conv_load's rows for the warp, from request_v_rows's copy.
__device__ __forceinline__ void conv_load_copied(const float (&rows)[kC + K - 1][kD], int warp, int lane, float4 (&x)[kConvRows + K - 1]) {
#pragma unroll
  for (int i = 0; i < kConvRows + K - 1; ++i) x[i] = *reinterpret_cast<const float4*>(&rows[kConvRows * warp + i][4 * lane]);
}

// Conv + SiLU in place over the rows conv_load gives: y[i] becomes chunk row kConvRows·w + i (zero
// past the chunk's end) for i < kConvRows.
__device__ __forceinline__ void conv_apply(const DeltaNetDecodeArgs& p, const ChunkMeta& ch, int warp, int64_t chn0, float4 (&y)[kConvRows + K - 1]) {
  const int r0 = kConvRows * warp;
  float4 w[4];  // w[c] = the K taps of channel chn0 + c, oldest first
#pragma unroll
  for (int c = 0; c < 4; ++c) w[c] = __ldg(reinterpret_cast<const float4*>(p.conv_w) + chn0 + c);
    // In place: output row i reads pre-conv rows i..i+K−1, and overwrites row i once it is done.
#pragma unroll
  for (int i = 0; i < kConvRows; ++i) {
    const float4 a = y[i], b = y[i + 1], c = y[i + 2], d = y[i + 3];
    float4 o;
    o.x = silu_fast(((0.0f + w[0].x * a.x) + w[0].y * b.x) + w[0].z * c.x + w[0].w * d.x);
    o.y = silu_fast(((0.0f + w[1].x * a.y) + w[1].y * b.y) + w[1].z * c.y + w[1].w * d.y);
    o.z = silu_fast(((0.0f + w[2].x * a.z) + w[2].y * b.z) + w[2].z * c.z + w[2].w * d.z);
    o.w = silu_fast(((0.0f + w[3].x * a.w) + w[3].y * b.w) + w[3].z * c.w + w[3].w * d.w);
    y[i] = r0 + i < ch.rows ? o : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  }
}

// Both: conv + SiLU of 4 channels over the warp's kConvRows rows.
__device__ __forceinline__ void conv_rows(const DeltaNetDecodeArgs& p, const SpanMeta& sp, const ChunkMeta& ch, int warp, int64_t chn0,
                                          int64_t conv_dim, float4 (&y)[kConvRows + K - 1]) {
  conv_load(p, sp, ch, warp, chn0, conv_dim, y);
  conv_apply(p, ch, warp, chn0, y);
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

// Four f32 as four bf16 (8 bytes), in order: their hi parts, or their lo parts.
__device__ __forceinline__ uint2 pack_bf16x4(float4 x) { return make_uint2(pack_bf16(x.x, x.y), pack_bf16(x.z, x.w)); }
__device__ __forceinline__ uint2 pack_bf16x4_lo(float4 x) { return make_uint2(pack_bf16_lo(x.x, x.y), pack_bf16_lo(x.z, x.w)); }

// What the gates of chunk row `row` of value head hv are made from, requested a value head ahead
// (their loads otherwise held every warp at the barrier after the gates). Rows past the chunk's end
// get β = 0 and g = 0, so they change nothing.
struct GateInputs {
  float a, b, dt_bias, neg_exp_a;
  bool in_chunk;
};
__device__ __forceinline__ GateInputs load_gate_inputs(const DeltaNetDecodeArgs& p, const ChunkMeta& ch, int row, int hv) {
  GateInputs in = {0.0f, 0.0f, p.dt_bias[hv], p.neg_exp_a[hv], row < ch.rows};
  if (in.in_chunk) {
    in.a = p.a[int64_t{ch.first_row + row} * p.ld_ba + hv];
    in.b = p.b[int64_t{ch.first_row + row} * p.ld_ba + hv];
  }
  return in;
}
__device__ __forceinline__ float beta_of(const GateInputs& in) { return in.in_chunk ? sigmoid(in.b) : 0.0f; }
__device__ __forceinline__ float log_decay_of(const GateInputs& in) { return in.in_chunk ? in.neg_exp_a * softplus(in.a + in.dt_bias) : 0.0f; }

// One 16×16×16 step of a product of f32 tiles in shared memory on the tensor cores, each operand
// split hi + lo (hi·hi + lo·hi + hi·lo: ~16 bits, far below the bf16 rounding T gets before its
// products). acc[n] += A B for the n-tiles n0 + 8n; A(m, k) = a[m0 + m][k0 + k] (row stride lda),
// B(k, n) = b[k0 + k][n0 + n] (row stride ldb).
__device__ __forceinline__ void mma_f32_split(float (&acc)[2][4], const float* a, int lda, const float* b, int ldb, int lane) {
  const int g = lane / 4, t = lane % 4;
  float2 af[4];  // A's fragment: rows g, g+8 at columns 2t.., then 2t+8..
#pragma unroll
  for (int i = 0; i < 4; ++i) af[i] = *reinterpret_cast<const float2*>(a + (g + 8 * (i % 2)) * lda + 2 * t + 8 * (i / 2));
  uint32_t ahi[4], alo[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    ahi[i] = pack_bf16(af[i].x, af[i].y);
    alo[i] = pack_bf16_lo(af[i].x, af[i].y);
  }
#pragma unroll
  for (int n = 0; n < 2; ++n) {
    float bf[4];  // B's fragment: rows 2t, 2t+1, 2t+8, 2t+9 of column 8n + g
#pragma unroll
    for (int i = 0; i < 4; ++i) bf[i] = b[(2 * t + (i % 2) + 8 * (i / 2)) * ldb + 8 * n + g];
    const uint32_t bhi0 = pack_bf16(bf[0], bf[1]), bhi1 = pack_bf16(bf[2], bf[3]);
    const uint32_t blo0 = pack_bf16_lo(bf[0], bf[1]), blo1 = pack_bf16_lo(bf[2], bf[3]);
    mma_bf16_16816(acc[n], ahi[0], ahi[1], ahi[2], ahi[3], bhi0, bhi1);
    mma_bf16_16816(acc[n], alo[0], alo[1], alo[2], alo[3], bhi0, bhi1);
    mma_bf16_16816(acc[n], ahi[0], ahi[1], ahi[2], ahi[3], blo0, blo1);
  }
}

// acc += T B for T's rows 16rb.. and B's columns 64cb.. (B stored [s][d], k-major), over the
// 16-steps k < 16(rb+1) only: T is lower triangular. With kLo, B is b_tile + b_lo_tile, each
// step's hi product before its lo one (U = T (Y_hi + Y_lo)).
template <bool kLo>
__device__ __forceinline__ void times_t(float (&acc)[8][4], uint32_t t_tile, uint32_t b_tile, uint32_t b_lo_tile, int rb, int cb, int lane) {
  for (int k0 = 0; k0 < 16 * (rb + 1); k0 += 16) {
    uint32_t a[4];
    load_a(a, t_tile, kLd64, 16 * rb, k0, lane);
#pragma unroll
    for (int h = 0; h < 4; ++h) {
      uint32_t b[4];
      load_b_kn(b, b_tile, kLd128, k0, 64 * cb + 16 * h, lane);
      mma_pair(acc[2 * h], acc[2 * h + 1], a, b);
      if (kLo) {
        load_b_kn(b, b_lo_tile, kLd128, k0, 64 * cb + 16 * h, lane);
        mma_pair(acc[2 * h], acc[2 * h + 1], a, b);
      }
    }
  }
}

__global__ void __launch_bounds__(kPrepareThreads, kPrepareBlocksPerSm) prepare_kernel(const DeltaNetDecodeArgs p, const Work work) {
  extern __shared__ float4 smem_raw[];
  PrepareSmem& sm = *reinterpret_cast<PrepareSmem*>(smem_raw);
  const int c = blockIdx.x, hk = blockIdx.y;
  const ChunkMeta ch = work.chunks[c];
  const SpanMeta sp = work.spans[ch.span];
  const int ratio = p.nv / p.nk;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  const int64_t key_dim = int64_t{p.nk} * kD, conv_dim = 2 * key_dim + int64_t{p.nv} * kD;
  if (tid < ratio) work.ready[int64_t{c} * p.nv + hk * ratio + tid] = 0;  // `state` runs after this kernel
  const uint32_t k_tile = smem_addr(&sm.k[0][0]), v_tile = smem_addr(&sm.y.v[0][0]), vlo_tile = smem_addr(&sm.y.vlo[0][0]),
                 t_tile = smem_addr(&sm.tb[0][0]);

  // q and k of rows kConvRows·warp.., channels 4·lane..: q normalised (and scaled) straight to the
  // workspace as hi and lo, k there too, its hi to shared memory (kept for every value head) and
  // its lo also in `state`'s fragment order (staged where L and T go later).
  GateInputs next_gates = {};
  if (tid < kC) next_gates = load_gate_inputs(p, ch, tid, hk * ratio);
  request_v_rows(p, sp, ch, hk * ratio, key_dim, conv_dim, sm.v_rows);  // the first value head's
  const int r0 = kConvRows * warp;
  {
    float4 y[kConvRows + K - 1];
    conv_rows(p, sp, ch, warp, hk * kD + 4 * lane, conv_dim, y);
    l2_normalize_rows(y, 1.0f / sqrtf(static_cast<float>(kD)));
    __nv_bfloat16* qn = work.qn + ((int64_t{c} * p.nk + hk) * kC + r0) * kD + 4 * lane;
#pragma unroll
    for (int i = 0; i < kConvRows; ++i) {
      *reinterpret_cast<uint2*>(qn + i * kD) = pack_bf16x4(y[i]);
      *reinterpret_cast<uint2*>(qn + (work.qlo - work.qn) + i * kD) = pack_bf16x4_lo(y[i]);
    }
    conv_rows(p, sp, ch, warp, key_dim + hk * kD + 4 * lane, conv_dim, y);
    l2_normalize_rows(y, 1.0f);
    __nv_bfloat16* kn = work.kn + ((int64_t{c} * p.nk + hk) * kC + r0) * kD + 4 * lane;
#pragma unroll
    for (int i = 0; i < kConvRows; ++i) {
      const uint2 k = pack_bf16x4(y[i]);
      *reinterpret_cast<uint2*>(&sm.k[r0 + i][4 * lane]) = k;
      *reinterpret_cast<uint2*>(kn + i * kD) = k;
      *reinterpret_cast<uint2*>(kn + (work.klo - work.kn) + i * kD) = pack_bf16x4_lo(y[i]);
    }
    // K_lo once more in the order `state` takes its A fragments of K_loᵀ: register (m8 + 2·r8)
    // of lane 4g + t for rows 16ks + 2t (+1) (+8 r8) and column 16w + g (+8 m8), rows paired.
    static_assert(kConvRows % 2 == 0, "a warp's rows pair up");
    uint32_t* frag = sm.frag;
#pragma unroll
    for (int i = 0; i < kConvRows; i += 2) {
      const int row = r0 + i, ks = row / 16, within = row % 16;
      const float even[4] = {y[i].x, y[i].y, y[i].z, y[i].w}, odd[4] = {y[i + 1].x, y[i + 1].y, y[i + 1].z, y[i + 1].w};
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int m = 4 * lane + e, mm = m % 16;
        const int frag_lane = 4 * (mm % 8) + (within % 8) / 2, reg = (mm >= 8 ? 1 : 0) + (within >= 8 ? 2 : 0);
        frag[((ks * 8 + m / 16) * 32 + frag_lane) * 4 + reg] = pack_bf16_lo(even[e], odd[e]);
      }
    }
  }
  __syncthreads();
  // K_lo's fragments to the workspace, 16 bytes per copy (4-byte stores from the conv's registers
  // wrote every sector in eight pieces: 45 us of the kernel at 27B shapes, 8k rows). L, in their
  // place, is next written after two more barriers.
  {
    uint4* dst = reinterpret_cast<uint4*>(work.klo_frag + (int64_t{c} * p.nk + hk) * (kC * kD / 2));
    const uint4* src = reinterpret_cast<const uint4*>(sm.frag);
    for (int e = tid; e < kC * kD / 8; e += kPrepareThreads) dst[e] = src[e];
  }

#pragma unroll 1
  for (int hv = hk * ratio; hv < (hk + 1) * ratio; ++hv) {
    // Gates (those of the next value head requested first).
    if (tid < kC) {
      const GateInputs gates = next_gates;
      if (hv + 1 < (hk + 1) * ratio) next_gates = load_gate_inputs(p, ch, tid, hv + 1);
      sm.beta[tid] = beta_of(gates);
      sm.gcum[tid] = log_decay_of(gates);
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

    // L = β_t (k_t·k_s) e^{G_t−G_s} below the diagonal: A = K rows, B = K rows (B(k, n) = K[n][k]).
    // Warp w: rows 16(w%4).., columns 32(w/4).. in two 16-column halves; halves wholly above the
    // diagonal are skipped (the condition is the warp's, as ldmatrix needs).
    {
      const int rb = warp % 4, cb = warp / 4;
      float acc[4][4] = {};
#pragma unroll
      for (int k0 = 0; k0 < kD; k0 += 16) {
        uint32_t a[4];
        load_a(a, k_tile, kLd128, 16 * rb, k0, lane);
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          if (32 * cb + 16 * h < 16 * (rb + 1)) {
            uint32_t b[4];
            load_b_nk(b, k_tile, kLd128, k0, 32 * cb + 16 * h, lane);
            mma_pair(acc[2 * h], acc[2 * h + 1], a, b);
          }
        }
      }
#pragma unroll
      for (int n = 0; n < 4; ++n)
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int row = 16 * rb + g + (i >= 2 ? 8 : 0), col = 32 * cb + 8 * n + 2 * t + (i & 1);
          sm.tri.l[row][col] = row > col ? sm.beta[row] * acc[n][i] * expf(sm.gcum[row] - sm.gcum[col]) : 0.0f;
        }
    }
    __syncthreads();

    // T = (I + L)⁻¹ by 16×16 blocks, in f32. Diagonal blocks: forward substitution, a column per thread.
    if (tid < 64) {
      const int o = 16 * (tid / 16), col = tid % 16;
      float x[16];
#pragma unroll
      for (int r = 0; r < 16; ++r) {
        float s = r == col ? 1.0f : 0.0f;
#pragma unroll
        for (int j = 0; j < r; ++j) s -= sm.tri.l[o + r][o + j] * x[j];
        x[r] = r < col ? 0.0f : s;
        sm.tri.ti[o + r][o + col] = x[r];
      }
    } else {
      for (int e = tid - 64; e < kC * kC; e += kPrepareThreads - 64) {
        const int r = e / kC, col = e % kC;
        if (r / 16 < col / 16) sm.tri.ti[r][col] = 0.0f;
      }
    }
    __syncthreads();
    // Below the diagonal, block row by block row: T_ij = −T_ii Σ_{k=j}^{i−1} L_ik T_kj, each 16×16
    // product on the tensor cores (mma_f32_split; as f32 FMAs, the shared loads of these products
    // took a fifth of the kernel's time). Warp j < i makes block j of row i: the sum to `partial`,
    // then −T_ii times it.
#pragma unroll
    for (int bi = 1; bi < 4; ++bi) {
      if (warp < bi) {
        const int bj = warp;
        float acc[2][4] = {};
        for (int kb = bj; kb < bi; ++kb) mma_f32_split(acc, &sm.tri.l[16 * bi][16 * kb], kLdTri, &sm.tri.ti[16 * kb][16 * bj], kLdTri, lane);
#pragma unroll
        for (int n = 0; n < 2; ++n) {
          *reinterpret_cast<float2*>(&sm.partial[bj][g][8 * n + 2 * t]) = make_float2(acc[n][0], acc[n][1]);
          *reinterpret_cast<float2*>(&sm.partial[bj][g + 8][8 * n + 2 * t]) = make_float2(acc[n][2], acc[n][3]);
        }
        __syncwarp();
        float tij[2][4] = {};
        mma_f32_split(tij, &sm.tri.ti[16 * bi][16 * bi], kLdTri, &sm.partial[bj][0][0], kLdPartial, lane);
#pragma unroll
        for (int n = 0; n < 2; ++n) {
          *reinterpret_cast<float2*>(&sm.tri.ti[16 * bi + g][16 * bj + 8 * n + 2 * t]) = make_float2(-tij[n][0], -tij[n][1]);
          *reinterpret_cast<float2*>(&sm.tri.ti[16 * bi + g + 8][16 * bj + 8 * n + 2 * t]) = make_float2(-tij[n][2], -tij[n][3]);
        }
      }
      __syncthreads();
    }

    // T rounded to bf16; then U = T Y, X = diag(βγ) K in Y's place (K stays for the next value
    // head) and W = T X.
    for (int e = tid; e < kC * kC / 4; e += kPrepareThreads) {
      const int r = e / (kC / 4), c4 = e % (kC / 4);
      *reinterpret_cast<uint2*>(&sm.tb[r][4 * c4]) = pack_bf16x4(*reinterpret_cast<const float4*>(&sm.tri.ti[r][4 * c4]));
    }
    cp_async_wait<0>();  // this head's v rows (this thread's copies; the barrier makes them everyone's)
    __syncthreads();
    // v of the same rows and channels, times β, to shared memory as hi and lo in L and T's place
    // (Y = diag(β) V is all the products need of V; L and T were last read before the barrier). Its
    // pre-conv rows were copied in while the previous head (or q and k) was worked on; the next
    // head's are requested once every warp has read these.
    {
      float4 y[kConvRows + K - 1];
      conv_load_copied(sm.v_rows, warp, lane, y);
      conv_apply(p, ch, warp, 2 * key_dim + int64_t{hv} * kD + 4 * lane, y);
#pragma unroll
      for (int i = 0; i < kConvRows; ++i) {
        const float b = sm.beta[r0 + i];
        const float4 yv = make_float4(b * y[i].x, b * y[i].y, b * y[i].z, b * y[i].w);
        *reinterpret_cast<uint2*>(&sm.y.v[r0 + i][4 * lane]) = pack_bf16x4(yv);
        *reinterpret_cast<uint2*>(&sm.y.vlo[r0 + i][4 * lane]) = pack_bf16x4_lo(yv);
      }
    }
    __syncthreads();
    if (hv + 1 < (hk + 1) * ratio) request_v_rows(p, sp, ch, hv + 1, key_dim, conv_dim, sm.v_rows);
    // Warp w: rows 16(w%4).., columns 64(w/4)..; A = T, B = X or Y stored [s][d] (k-major). T is
    // lower triangular: rows 16rb.. need the 16-steps k < 16(rb+1) only. U = T (Y_hi + Y_lo): the
    // rounding of Y would otherwise reach the state undamped.
    const int rb = warp % 4, cb = warp / 4;
    const int row = 16 * rb + g;
    const int64_t tile = (int64_t{c} * p.nv + hv) * kC * kD;
    {
      float acc[8][4] = {};
      times_t<true>(acc, t_tile, v_tile, vlo_tile, rb, cb, lane);
      // U is only subtracted from: f32, whole sectors; read by `state` and `output`, streamed
      float* dst = work.u + tile;
#pragma unroll
      for (int n = 0; n < 8; ++n) {
        const int col = 64 * cb + 8 * n + 2 * t;
        __stcs(reinterpret_cast<float2*>(dst + row * kD + col), make_float2(acc[n][0], acc[n][1]));
        __stcs(reinterpret_cast<float2*>(dst + (row + 8) * kD + col), make_float2(acc[n][2], acc[n][3]));
      }
    }
    __syncthreads();  // Y read by all: X into its place (8 values per step)
    for (int e = tid; e < kC * kD / 8; e += kPrepareThreads) {
      const int r = e / (kD / 8), c8 = e % (kD / 8);
      const float bk = sm.beta[r] * expf(sm.gcum[r]);
      auto scaled = [bk](uint32_t pair) {
        const float2 f = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&pair));
        return pack_bf16(f.x * bk, f.y * bk);
      };
      const uint4 x = *reinterpret_cast<const uint4*>(&sm.k[r][8 * c8]);
      *reinterpret_cast<uint4*>(&sm.y.v[r][8 * c8]) = make_uint4(scaled(x.x), scaled(x.y), scaled(x.z), scaled(x.w));
    }
    __syncthreads();
    {
      float acc[8][4] = {};
      times_t<false>(acc, t_tile, v_tile, 0, rb, cb, lane);
      // W feeds a product in `state`: bf16, staged in Y_lo's place (dead since U) and written out in
      // 16-byte pieces, as K_lo's fragments.
      __nv_bfloat16* dst = &sm.y.vlo[0][0];
#pragma unroll
      for (int n = 0; n < 8; ++n) {
        const int col = 64 * cb + 8 * n + 2 * t;
        *reinterpret_cast<uint32_t*>(dst + row * kLd128 + col) = pack_bf16(acc[n][0], acc[n][1]);
        *reinterpret_cast<uint32_t*>(dst + (row + 8) * kLd128 + col) = pack_bf16(acc[n][2], acc[n][3]);
      }
    }
    __syncthreads();  // W staged whole; X read by all
    {
      __nv_bfloat16* dst = work.w + tile;
      const __nv_bfloat16* src = &sm.y.vlo[0][0];
      for (int e = tid; e < kC * kD / 8; e += kPrepareThreads) {
        const int r = e / (kD / 8), c8 = e % (kD / 8);
        *reinterpret_cast<uint4*>(dst + r * kD + 8 * c8) = *reinterpret_cast<const uint4*>(src + r * kLd128 + 8 * c8);
      }
    }
  }  // value heads
}

// ring: after `prepare` has read the rings, each span leaves its last K pre-conv rows in its ring
// (ring row = position mod K), as K decode steps would have. A block per (span, ring row).
__global__ void ring_kernel(const DeltaNetDecodeArgs p, const Work work) {
  const SpanMeta sp = work.spans[blockIdx.x];
  const int pos = sp.start_position + sp.rows - K + static_cast<int>(blockIdx.y);  // the last K positions
  if (pos < sp.start_position) return;                                             // before the span: the ring already holds it
  const int64_t conv_dim = 2 * int64_t{p.nk} * kD + int64_t{p.nv} * kD;
  const float4* src = reinterpret_cast<const float4*>(p.qkv + int64_t{sp.first_row + pos - sp.start_position} * p.ld_qkv);
  float4* dst = reinterpret_cast<float4*>(p.conv_state + int64_t{sp.slot} * p.conv_slot_stride + (pos % K) * conv_dim);
  for (int64_t i = threadIdx.x; i < conv_dim / 4; i += blockDim.x) dst[i] = src[i];
}

}  // namespace

std::size_t prepare_shared_bytes() { return sizeof(PrepareSmem); }

void launch_prepare(const DeltaNetDecodeArgs& p, const Work& work, int chunks, cudaStream_t stream) {
  QWENRT_CUDA_CHECK(cudaFuncSetAttribute(prepare_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(sizeof(PrepareSmem))));
  prepare_kernel<<<dim3(chunks, p.nk), kPrepareThreads, sizeof(PrepareSmem), stream>>>(p, work);
  QWENRT_CUDA_CHECK_LAUNCH();
}

void launch_ring(const DeltaNetDecodeArgs& p, const Work& work, int spans, cudaStream_t stream) {
  ring_kernel<<<dim3(spans, K), 256, 0, stream>>>(p, work);
  QWENRT_CUDA_CHECK_LAUNCH();
}

}  // namespace qwenrt::cuda::deltanet_chunks
