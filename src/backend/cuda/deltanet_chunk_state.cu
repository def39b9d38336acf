// The `state` kernel of the chunked DeltaNet window (deltanet_prefill.h).
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/deltanet_chunks.cuh"

namespace qwenrt::cuda::deltanet_chunks {
namespace {

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

}  // namespace

void launch_state(const DeltaNetDecodeArgs& p, const Work& work, int spans, cudaStream_t stream) {
  QWENRT_CUDA_CHECK(cudaFuncSetAttribute(state_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(sizeof(StateSmem))));
  state_kernel<<<dim3(kD / kSlice, p.nv, spans), kStateThreads, sizeof(StateSmem), stream>>>(p, work);
  QWENRT_CUDA_CHECK_LAUNCH();
}

}  // namespace qwenrt::cuda::deltanet_chunks
