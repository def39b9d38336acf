// The `output` kernel of the chunked DeltaNet window (deltanet_prefill.h).
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/deltanet_chunks.cuh"
#include "backend/cuda/gate_math.cuh"

namespace qwenrt::cuda::deltanet_chunks {
namespace {

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

}  // namespace

void launch_output(const DeltaNetDecodeArgs& p, const Work& work, int chunks, cudaStream_t stream) {
  QWENRT_CUDA_CHECK(cudaFuncSetAttribute(output_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(sizeof(OutputSmem))));
  output_kernel<<<dim3(chunks, p.nv), kOutputThreads, sizeof(OutputSmem), stream>>>(p, work);
  QWENRT_CUDA_CHECK_LAUNCH();
}

}  // namespace qwenrt::cuda::deltanet_chunks
