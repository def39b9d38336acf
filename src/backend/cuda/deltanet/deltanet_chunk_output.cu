// The `output` kernel of the chunked DeltaNet window (deltanet_prefill.h).
#include "backend/cuda/deltanet/deltanet_chunk_output.h"
#include "backend/cuda/deltanet/deltanet_chunks.cuh"
#include "backend/cuda/ptx/gate_math.cuh"
#include "backend/cuda/runtime/chained_launch.h"
#include "backend/cuda/runtime/cuda_check.h"

namespace qwenrt::cuda::deltanet_chunks {
namespace {

// output: one block per (chunk, value head). O = diag(γ) Q S₀ + P Δ with P = (Q Kᵀ) ⊙ e^{G_t−G_s}
// on and below the diagonal and Δ = U − W S₀, then the gated RMSNorm, to bf16. Warp w: rows
// 16(w%4).., columns of O and Δ 64(w/4)..; P is made once, by blocks spread over all warps,
// through shared memory.
//
// Δ is made here rather than read: `state` makes the same Δ (the same products in the same order
// from the same bf16 S₀, so the same bits), but storing it there, hi and lo, cost that sequential
// kernel a quarter of its time (27B shapes, 8k rows: state 514 -> 385 us, output 338 -> 430 us);
// here it shares S₀'s fragments with Q S₀.

constexpr int kOutputThreads = 256;
// Shared memory, 104 KiB (two blocks per multiprocessor): every operand whole, bf16; q, k, P and
// Δ as hi and lo (deltanet_chunks.cuh). Q, W (in K's place), K_lo and U (to registers) are
// requested at the start, S₀ once `state` has stored it, K once W S₀ is made. Δ goes in S₀'s
// place then, P in K's and K_lo's once it is made, and
// z in Q's (z fetched before P Δ rather than read from memory at the end, where its loads stalled
// the kernel for a third of its time). (Reading K sooner, into S₀'s first half once that is read,
// was slower.)
struct OutputSmem {
  alignas(16) __nv_bfloat16 q[kC][kLd128];
  alignas(16) __nv_bfloat16 qlo[kC][kLd128];
  alignas(16) __nv_bfloat16 k[kC][kLd128];    // W, then K_hi, then P_hi
  alignas(16) __nv_bfloat16 klo[kC][kLd128];  // K_lo, then P_lo
  alignas(16) __nv_bfloat16 s0[kD][kLd128];   // S₀, then Δ_hi and Δ_lo
  alignas(16) float gcum[kC];
  alignas(16) float norm_w[kD];  // read at the start: from memory at the end it stalled the norm
  float row_ss[2][kC];
};
// z's rows for the gated norm, f32, in the place of Q (hi and lo) once P is made. A row stride of
// 8 floats more than 128 puts a warp's float2 reads of 8 rows in two wavefronts.
constexpr int kLdZ = kD + 8;
static_assert(kC * kLdZ * sizeof(float) <= 2 * sizeof(OutputSmem::q), "z's tile fits where Q and Q_lo were");
__device__ __forceinline__ float* z_tile(OutputSmem& sm) { return reinterpret_cast<float*>(&sm.q[0][0]); }
// Δ (hi, then lo: [kC][kLd128] bf16 each) in S₀'s place once W S₀ is made.
static_assert(2 * kC * kLd128 * sizeof(__nv_bfloat16) <= sizeof(OutputSmem::s0), "Δ's tiles fit where S₀ was");
__device__ __forceinline__ __nv_bfloat16* d_hi(OutputSmem& sm) { return &sm.s0[0][0]; }
__device__ __forceinline__ __nv_bfloat16* d_lo(OutputSmem& sm) { return &sm.s0[0][0] + kC * kLd128; }
// P (hi and lo: [kC][kLd64] bf16 each) in K's and K_lo's places once it is made.
static_assert(kLd64 <= kLd128, "P's tiles fit where K was");

// P's 16×16 blocks on and below the diagonal, row-major: block `blk` is (r, j), j <= r.
constexpr int kPBlocks = (kC / 16) * (kC / 16 + 1) / 2;  // 10
__device__ __forceinline__ void p_block(int blk, int& r, int& j) {
  r = 0;
  while ((r + 1) * (r + 2) / 2 <= blk) ++r;
  j = blk - r * (r + 1) / 2;
}

__global__ void __launch_bounds__(kOutputThreads, 2) output_kernel(const DeltaNetDecodeArgs p, const Work work) {
  extern __shared__ float4 smem_raw[];
  OutputSmem& sm = *reinterpret_cast<OutputSmem*>(smem_raw);
  const int hv = blockIdx.x;
  const int64_t c = blockIdx.y;  // chunks in order: the first ones are ready first
  const ChunkMeta ch = work.chunks[c];
  const int hk = hv / (p.nv / p.nk);
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  const int rb = warp % 4, cb = warp / 4;  // rows 16rb.., O and Δ columns 64cb..
  const uint32_t q_tile = smem_addr(&sm.q[0][0]), qlo_tile = smem_addr(&sm.qlo[0][0]), k_tile = smem_addr(&sm.k[0][0]),
                 klo_tile = smem_addr(&sm.klo[0][0]), s0_tile = smem_addr(&sm.s0[0][0]);
  const uint32_t w_tile = k_tile, phi_tile = k_tile, plo_tile = klo_tile;
  const uint32_t dhi_tile = smem_addr(d_hi(sm)), dlo_tile = smem_addr(d_lo(sm));

  const int64_t head_tile = (c * p.nv + hv) * kC * kD;
  const int64_t qk_tile = (c * p.nk + hk) * kC * kD;
  // What `prepare` made (done before `state` started) is requested first; S₀ once `state` has
  // stored it for this chunk, all its column slices (this kernel runs chained beside `state`).
  copy_tile_async<kC, kD>(&sm.q[0][0], kLd128, work.qn + qk_tile, kD);
  copy_tile_async<kC, kD>(&sm.qlo[0][0], kLd128, work.qlo + qk_tile, kD);
  if (tid < kC / 4) cp_async16(&sm.gcum[4 * tid], work.gcum + (c * p.nv + hv) * kC + 4 * tid);
  if (tid < kD) sm.norm_w[tid] = p.norm_w[tid];  // any alignment; seen by all after the first barrier
  copy_tile_async<kC, kD>(&sm.k[0][0], kLd128, work.w + head_tile, kD);
  copy_tile_async<kC, kD>(&sm.klo[0][0], kLd128, work.klo + qk_tile, kD);
  cp_async_commit();
  // D = W S₀ − U accumulates from −U, read where each thread holds D (whole 32-byte sectors per
  // quad) while the rest arrives; Δ = −D, as `state` makes it.
  const int row0 = 16 * rb + g, row1 = row0 + 8;
  float d[8][4];
  {
    const float* u = work.u + head_tile;
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) {
      const int col = 64 * cb + 8 * nt + 2 * t;
      const float2 u0 = __ldcs(reinterpret_cast<const float2*>(u + row0 * kD + col));
      const float2 u1 = __ldcs(reinterpret_cast<const float2*>(u + row1 * kD + col));
      d[nt][0] = -u0.x;
      d[nt][1] = -u0.y;
      d[nt][2] = -u1.x;
      d[nt][3] = -u1.y;
    }
  }
  if (tid == 0) wait_ready(work.ready + c * p.nv + hv, work.slices);
  __syncthreads();
  copy_tile_async<kD, kD>(&sm.s0[0][0], kLd128, work.h + (c * p.nv + hv) * kD * kD, kD);
  cp_async_commit();
  cp_async_wait<0>();  // Q, W, K_lo, G, S₀
  __syncthreads();

  // O = (Q_hi + Q_lo) S₀ and D (B = S₀, k-major, loaded once for both); O scaled by γ_t per row.
  float o[8][4] = {};
#pragma unroll
  for (int ks = 0; ks < kD / 16; ++ks) {
    uint32_t qa[4], qalo[4], wa[4];
    load_a(qa, q_tile, kLd128, 16 * rb, 16 * ks, lane);
    load_a(qalo, qlo_tile, kLd128, 16 * rb, 16 * ks, lane);
    load_a(wa, w_tile, kLd128, 16 * rb, 16 * ks, lane);
#pragma unroll
    for (int h = 0; h < 4; ++h) {
      uint32_t b[4];
      load_b_kn(b, s0_tile, kLd128, 16 * ks, 64 * cb + 16 * h, lane);
      mma_pair(o[2 * h], o[2 * h + 1], qa, b);
      mma_pair(o[2 * h], o[2 * h + 1], qalo, b);
      mma_pair(d[2 * h], d[2 * h + 1], wa, b);
    }
  }
  const float e0 = expf(sm.gcum[row0]), e1 = expf(sm.gcum[row1]);
#pragma unroll
  for (int nt = 0; nt < 8; ++nt) {
    o[nt][0] *= e0;
    o[nt][1] *= e0;
    o[nt][2] *= e1;
    o[nt][3] *= e1;
  }
#pragma unroll
  for (int nt = 0; nt < 8; ++nt)
#pragma unroll
    for (int i = 0; i < 4; ++i) d[nt][i] = -d[nt][i];  // Δ
  __syncthreads();                                     // S₀ and W read by all: Δ into S₀'s place, K into W's
  copy_tile_async<kC, kD>(&sm.k[0][0], kLd128, work.kn + qk_tile, kD);
  cp_async_commit();
#pragma unroll
  for (int nt = 0; nt < 8; ++nt) {
    const int col = 64 * cb + 8 * nt + 2 * t;
    *reinterpret_cast<uint32_t*>(d_hi(sm) + row0 * kLd128 + col) = pack_bf16(d[nt][0], d[nt][1]);
    *reinterpret_cast<uint32_t*>(d_hi(sm) + row1 * kLd128 + col) = pack_bf16(d[nt][2], d[nt][3]);
    *reinterpret_cast<uint32_t*>(d_lo(sm) + row0 * kLd128 + col) = pack_bf16_lo(d[nt][0], d[nt][1]);
    *reinterpret_cast<uint32_t*>(d_lo(sm) + row1 * kLd128 + col) = pack_bf16_lo(d[nt][2], d[nt][3]);
  }
  cp_async_wait<0>();  // K, K_lo
  __syncthreads();     // ... landed for all; Δ whole

  // P = (Q Kᵀ) ⊙ e^{G_t−G_s} on and below the diagonal, by 16×16 blocks spread evenly over the
  // warps (a warp making the P rows of its own O rows would do 1 to 4 blocks, and each block twice
  // over); A = Q rows, B = K rows, Q_hi K_hi + Q_lo K_hi + Q_hi K_lo (Q Kᵀ from bf16 q and k alone
  // costs the output rows, where the gated norm scales a small O up, several 1e-3). Kept in
  // registers until every warp is done with K, then to shared memory as hi and lo, rounded as the
  // A fragments of P Δ take them.
  constexpr int kWarps = kOutputThreads / 32;
  constexpr int kBlocksPerWarp = (kPBlocks + kWarps - 1) / kWarps;
  float pacc[kBlocksPerWarp][2][4] = {};
#pragma unroll
  for (int i = 0; i < kBlocksPerWarp; ++i) {
    const int blk = warp + i * kWarps;
    if (blk >= kPBlocks) break;
    int r, j;
    p_block(blk, r, j);
#pragma unroll
    for (int ks = 0; ks < kD / 16; ++ks) {
      uint32_t qa[4], qalo[4], b[4], blo[4];
      load_a(qa, q_tile, kLd128, 16 * r, 16 * ks, lane);
      load_a(qalo, qlo_tile, kLd128, 16 * r, 16 * ks, lane);
      load_b_nk(b, k_tile, kLd128, 16 * ks, 16 * j, lane);
      load_b_nk(blo, klo_tile, kLd128, 16 * ks, 16 * j, lane);
      mma_pair(pacc[i][0], pacc[i][1], qa, b);
      mma_pair(pacc[i][0], pacc[i][1], qalo, b);
      mma_pair(pacc[i][0], pacc[i][1], qa, blo);
    }
  }
  __syncthreads();  // K and Q read by all: P into K's places, z's rows into Q's
  float* zs = z_tile(sm);
  const bool z_async = (reinterpret_cast<uintptr_t>(p.z) % 16 == 0) && p.ld_z % 4 == 0;
  for (int e = tid; e < ch.rows * (kD / 4); e += kOutputThreads) {
    const int r = e / (kD / 4), c4 = 4 * (e % (kD / 4));
    const float* src = p.z + (ch.first_row + r) * p.ld_z + int64_t{hv} * kD + c4;
    if (z_async) cp_async16(zs + r * kLdZ + c4, src);
    else *reinterpret_cast<float4*>(zs + r * kLdZ + c4) = make_float4(src[0], src[1], src[2], src[3]);
  }
  cp_async_commit();
  __nv_bfloat16* const phi = &sm.k[0][0];
  __nv_bfloat16* const plo = &sm.klo[0][0];
#pragma unroll
  for (int i = 0; i < kBlocksPerWarp; ++i) {
    const int blk = warp + i * kWarps;
    if (blk >= kPBlocks) break;
    int r, j;
    p_block(blk, r, j);
    const int pr0 = 16 * r + g, pr1 = pr0 + 8;
    const float g0 = sm.gcum[pr0], g1 = sm.gcum[pr1];
#pragma unroll
    for (int n = 0; n < 2; ++n) {
      float* acc = pacc[i][n];
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int row = e >= 2 ? pr1 : pr0, col = 16 * j + 8 * n + 2 * t + (e & 1);
        acc[e] = col <= row ? acc[e] * expf((e >= 2 ? g1 : g0) - sm.gcum[col]) : 0.0f;
      }
      const int col = 16 * j + 8 * n + 2 * t;
      *reinterpret_cast<uint32_t*>(phi + pr0 * kLd64 + col) = pack_bf16(acc[0], acc[1]);
      *reinterpret_cast<uint32_t*>(phi + pr1 * kLd64 + col) = pack_bf16(acc[2], acc[3]);
      *reinterpret_cast<uint32_t*>(plo + pr0 * kLd64 + col) = pack_bf16_lo(acc[0], acc[1]);
      *reinterpret_cast<uint32_t*>(plo + pr1 * kLd64 + col) = pack_bf16_lo(acc[2], acc[3]);
    }
  }
  __syncthreads();  // P whole

  // O += P Δ (A = P from shared memory, B = Δ, k-major) over the 16-steps on and below the
  // diagonal, as P_hi Δ_hi + P_lo Δ_hi + P_hi Δ_lo.
#pragma unroll
  for (int j = 0; j < kC / 16; ++j)
    if (j <= rb) {
      uint32_t pf[4], pflo[4];
      load_a(pf, phi_tile, kLd64, 16 * rb, 16 * j, lane);
      load_a(pflo, plo_tile, kLd64, 16 * rb, 16 * j, lane);
#pragma unroll
      for (int h = 0; h < 4; ++h) {
        uint32_t b[4], blo[4];
        load_b_kn(b, dhi_tile, kLd128, 16 * j, 64 * cb + 16 * h, lane);
        load_b_kn(blo, dlo_tile, kLd128, 16 * j, 64 * cb + 16 * h, lane);
        mma_pair(o[2 * h], o[2 * h + 1], pf, b);
        mma_pair(o[2 * h], o[2 * h + 1], pflo, b);
        mma_pair(o[2 * h], o[2 * h + 1], pf, blo);
      }
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
  cp_async_wait<0>();  // z
  __syncthreads();
  // A lane has columns 2t, 2t+1 of each 8-column tile: pairs, stored as pairs where the output
  // row is aligned for it (the row strides need not be even).
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int row = half == 0 ? row0 : row1;
    if (row >= ch.rows) continue;
    const float inv = 1.0f / sqrtf((sm.row_ss[0][row] + sm.row_ss[1][row]) / static_cast<float>(kD) + p.eps);
    const int64_t R = ch.first_row + row;
    const float* z = zs + row * kLdZ;
    __nv_bfloat16* y = p.out + R * p.ld_out + int64_t{hv} * kD;
    const bool pairs = reinterpret_cast<uintptr_t>(y) % 4 == 0;
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) {
      const int col = 64 * cb + 8 * nt + 2 * t;
      const float2 zz = *reinterpret_cast<const float2*>(z + col), nw = *reinterpret_cast<const float2*>(&sm.norm_w[col]);
      const float v0 = o[nt][2 * half] * inv * nw.x * silu_fast(zz.x), v1 = o[nt][2 * half + 1] * inv * nw.y * silu_fast(zz.y);
      if (pairs) {
        *reinterpret_cast<uint32_t*>(y + col) = pack_bf16(v0, v1);
      } else {
        y[col] = __float2bfloat16_rn(v0);
        y[col + 1] = __float2bfloat16_rn(v1);
      }
    }
  }
}

}  // namespace

std::size_t output_shared_bytes() { return sizeof(OutputSmem); }

void launch_output(const DeltaNetDecodeArgs& p, const Work& work, int chunks, cudaStream_t stream) {
  QWENRT_CUDA_CHECK(cudaFuncSetAttribute(output_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(sizeof(OutputSmem))));
  launch_chained(output_kernel, dim3(p.nv, chunks), dim3(kOutputThreads), sizeof(OutputSmem), stream, p, work);
}

}  // namespace qwenrt::cuda::deltanet_chunks
