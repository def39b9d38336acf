// The `state` kernel of the chunked DeltaNet window on Hopper's warpgroup products (wgmma, sm_90a),
// for blocks of 64 state columns (value heads >= 32: 9B, 27B). The same products, splits and
// order per accumulator as deltanet_chunk_state.cu's mma.sync kernel; what changes is who reads
// shared memory. There every warp loaded its own fragments of W, S₀ and the weighted Δ (hi and lo),
// each read by four warps: ~300 KB of shared-memory traffic per chunk, the kernel's limit (ncu at
// 27B 8k: wavefronts at 65-70% of peak, tensor pipe 21%). Here each operand tile is read once per
// warpgroup product:
//
//   Δ' = −U + W S₀     warpgroup 0 alone, m64n64k16 x 8: A = W (K-major), B = S₀ (N-major). One
//                      warpgroup runs at the multiprocessor's full tensor rate; the others wait at
//                      the barrier, as there is nothing else of the chunk to do before Δ.
//   S  = γ S + Kᵀ Δw   both, m64n64k16 x 12 each (4 steps of the chunk's rows, three splits):
//                      A = K_hiᵀ, K_loᵀ from registers (as before), B = Δwᵀ hi, lo (K-major).
//
// Warpgroup q keeps S rows 64q.. in its accumulators: warp w holds rows 16w + g (+8), columns
// 8j + 2t (+1), j < 8, so `prepare`'s K_lo fragments (rows 16w..) serve as they are. While
// warpgroup 0 makes Δ, warpgroup 1 requests the next chunk and stores the snapshot for `output`.
// Two warpgroups rather than four: the same tensor rate (they share the multiprocessor's), and
// room for S, Δ and the fragments in registers without spilling.
#include "backend/cuda/deltanet/deltanet_chunk_state_wgmma.h"
#include "backend/cuda/deltanet/deltanet_chunks.cuh"
#include "backend/cuda/ptx/wgmma.cuh"
#include "backend/cuda/runtime/cuda_check.h"

namespace qwenrt::cuda::deltanet_chunks {
namespace {

constexpr int kSlice = 64;
constexpr int kThreads = 256;     // two warpgroups
constexpr int kLdU = kSlice + 8;  // floats

// Tiles wgmma reads are 128-byte-swizzled (wgmma_layout.cuh) and start on 1024-byte boundaries;
// K stays padded for ldmatrix.
struct WgmmaStateInputs {
  alignas(1024) __nv_bfloat16 w[kC * kD];  // W [64 t][128 i]: two column blocks
  alignas(16) __nv_bfloat16 k[kC][kLd128];
  alignas(16) float u[kC][kLdU];  // the block's columns
  alignas(16) float gcum[kC];
  alignas(16) uint4 klo[kC * kD / 8];  // K_loᵀ's A fragments in lane order, as `prepare` lays them out
};
struct WgmmaStateSmem {
  WgmmaStateInputs in[2];                         // chunk c+1's arrive while chunk c is worked on
  alignas(1024) __nv_bfloat16 h[kD * kSlice];     // S₀ [128 i][64 j], rounded: one column block
  alignas(1024) __nv_bfloat16 dt[kSlice * kC];    // (Δ rows times e^{G_C−G_t})ᵀ [64 j][64 t], hi
  alignas(1024) __nv_bfloat16 dtlo[kSlice * kC];  // ... lo
};
constexpr std::size_t kSmemBytes = sizeof(WgmmaStateSmem) + 1024;  // and room to align to 1024

__global__ void __launch_bounds__(kThreads, 1) state_wgmma_kernel(const DeltaNetDecodeArgs p, const Work work) {
  extern __shared__ float4 smem_raw[];
  const uint32_t raw = smem_addr(smem_raw), base = (raw + 1023) & ~1023u;
  WgmmaStateSmem& sm = *reinterpret_cast<WgmmaStateSmem*>(reinterpret_cast<unsigned char*>(smem_raw) + (base - raw));
  const int j0 = blockIdx.x * kSlice, hv = blockIdx.y;
  const SpanMeta sp = work.spans[blockIdx.z];
  const int hk = hv / (p.nv / p.nk);
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  grid_launch_dependents();  // `output` runs beside this kernel, chunk by chunk (Work::ready)
  float* state = p.rec_state + int64_t{sp.slot} * p.rec_slot_stride + int64_t{hv} * kD * kD;
  unsigned char* const h_bytes = reinterpret_cast<unsigned char*>(sm.h);
  unsigned char* const dt_bytes = reinterpret_cast<unsigned char*>(sm.dt);
  unsigned char* const dtlo_bytes = reinterpret_cast<unsigned char*>(sm.dtlo);
  const uint32_t h_tile = smem_addr(sm.h), dt_tile = smem_addr(sm.dt), dtlo_tile = smem_addr(sm.dtlo);

  // s[4j + i]: rows srow (i < 2) and srow + 8, columns j0 + 8j + 2t (+1).
  const int srow = 16 * warp + g;
  float s[32];
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const int col = j0 + 8 * j + 2 * t;
    const float2 lo = *reinterpret_cast<const float2*>(state + srow * kD + col);
    const float2 hi = *reinterpret_cast<const float2*>(state + (srow + 8) * kD + col);
    s[4 * j + 0] = lo.x;
    s[4 * j + 1] = lo.y;
    s[4 * j + 2] = hi.x;
    s[4 * j + 3] = hi.y;
  }

  // A chunk's W (into the swizzled layout), K, U, G and K_lo's fragments as one group of
  // asynchronous copies, spread over `threads` threads from `first` on.
  auto load = [&](int64_t c, WgmmaStateInputs& in, int first, int threads) {
    const int me = tid - first;
    const int64_t head_tile = (c * p.nv + hv) * kC * kD;
    const uint32_t w_tile = smem_addr(in.w);
    const __nv_bfloat16* w_src = work.w + head_tile;
    const __nv_bfloat16* k_src = work.kn + (c * p.nk + hk) * kC * kD;
    constexpr int kRowPieces = kD / 8;  // 16-byte pieces per W or K row
    for (int e = me; e < kC * kRowPieces; e += threads) {
      const int r = e / kRowPieces, c8 = e % kRowPieces;
      cp_async16(w_tile + wgmma_tile_offset(kC, r, c8), w_src + r * kD + 8 * c8, true);
      cp_async16(&in.k[r][8 * c8], k_src + r * kD + 8 * c8);
    }
    const float* u_src = work.u + head_tile + j0;
    for (int e = me; e < kC * kSlice / 4; e += threads) {
      const int r = e / (kSlice / 4), c4 = e % (kSlice / 4);
      cp_async16(&in.u[r][4 * c4], u_src + r * kD + 4 * c4);
    }
    if (me < kC / 4) cp_async16(&in.gcum[4 * me], work.gcum + (c * p.nv + hv) * kC + 4 * me);
    const uint4* klo_src = reinterpret_cast<const uint4*>(work.klo_frag + (c * p.nk + hk) * (kC * kD / 2));
    for (int e = me; e < kC * kD / 8; e += threads) cp_async16(&in.klo[e], klo_src + e);
    cp_async_commit();
  };
  if (sp.chunks > 0) load(sp.first_chunk, sm.in[0], 0, kThreads);
  for (int ci = 0; ci < sp.chunks; ++ci) {
    const int64_t c = sp.first_chunk + ci;
    const WgmmaStateInputs& in = sm.in[ci % 2];
    // S₀ of this chunk, rounded, into its swizzled tile (last read by the previous chunk's Δ and
    // snapshot, both before its second barrier).
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const int col = 8 * j + 2 * t;
      const uint32_t within = (col % 8) * 2;
      *reinterpret_cast<uint32_t*>(h_bytes + wgmma_tile_offset(kD, srow, col / 8) + within) = pack_bf16(s[4 * j + 0], s[4 * j + 1]);
      *reinterpret_cast<uint32_t*>(h_bytes + wgmma_tile_offset(kD, srow + 8, col / 8) + within) = pack_bf16(s[4 * j + 2], s[4 * j + 3]);
    }
    cp_async_wait<0>();                                                      // this chunk's inputs, the only group in flight
    fence_proxy_async_shared();                                              // ... and S₀ visible to the products' reads
    __syncthreads();                                                         // ... for every thread; the previous chunk all done
    if (ci > 0 && tid == 0) signal_ready(work.ready + (c - 1) * p.nv + hv);  // its snapshot is stored
    // Warpgroup 0 goes straight to Δ; warpgroup 1 requests chunk c+1 (into the buffer chunk c−1 left,
    // past the barrier) and stores S₀ to the workspace for `output`: 128 rows of 128 bytes.
    if (warp >= 4) {
      constexpr int kHelpers = kThreads - 128;
      if (ci + 1 < sp.chunks) load(c + 1, sm.in[(ci + 1) % 2], 128, kHelpers);
      __nv_bfloat16* snapshot = work.h + (c * p.nv + hv) * kD * kD + j0;
      for (int e = tid - 128; e < kD * kSlice / 8; e += kHelpers) {
        const int r = e / (kSlice / 8), c8 = e % (kSlice / 8);
        *reinterpret_cast<uint4*>(snapshot + r * kD + 8 * c8) = *reinterpret_cast<const uint4*>(h_bytes + wgmma_tile_offset(kD, r, c8));
      }
    }
    const float g_last = in.gcum[kC - 1], gamma = expf(g_last);
    // The update's A fragments (wgmma reads them until its wait, so all are loaded first), here
    // where their loads overlap Δ: K_hiᵀ from the K tile, K_loᵀ as `prepare` laid them out (rows
    // 16w.. of the 128, in lane order).
    uint32_t khi[kC / 16][4], klo[kC / 16][4];
    {
      const uint32_t k_tile = smem_addr(&in.k[0][0]);
#pragma unroll
      for (int ks = 0; ks < kC / 16; ++ks) {
        load_a_t(khi[ks], k_tile, kLd128, 16 * warp, 16 * ks, lane);
        const uint4 v = in.klo[ks * 8 * 32 + 32 * warp + lane];
        klo[ks][0] = v.x;
        klo[ks][1] = v.y;
        klo[ks][2] = v.z;
        klo[ks][3] = v.w;
      }
    }
    // Δ' = −U + W S₀ on warpgroup 0 (Δ = −Δ'); to shared memory transposed, times e^{G_C−G_t},
    // hi and lo, as the update's K-major B. (`output` makes the same Δ again from the snapshot.)
    if (warp < 4) {
      const int row = 16 * warp + g;
      float d[32];
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const int col = 8 * j + 2 * t;
        const float2 u0 = *reinterpret_cast<const float2*>(&in.u[row][col]);
        const float2 u1 = *reinterpret_cast<const float2*>(&in.u[row + 8][col]);
        d[4 * j + 0] = -u0.x;
        d[4 * j + 1] = -u0.y;
        d[4 * j + 2] = -u1.x;
        d[4 * j + 3] = -u1.y;
      }
      const uint32_t w_tile = smem_addr(in.w);
      const float w0 = expf(g_last - in.gcum[row]), w1 = expf(g_last - in.gcum[row + 8]);  // while Δ runs
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < kD / 16; ++kk)
        wgmma_64x64_ss_nmajor(d, wgmma_desc(w_tile + (kk / 4) * kC * 128 + (kk % 4) * 32, 16, 1024), wgmma_desc(h_tile + kk * 16 * 128, 16, 1024), 1);
      wgmma_commit();
      wgmma_wait<0>();
      wgmma_hold(d);
#pragma unroll
      for (int j = 0; j < 8; ++j)
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int tr = row + 8 * (i / 2), jc = 8 * j + 2 * t + (i % 2);
          const float x = -d[4 * j + i] * (i < 2 ? w0 : w1);
          const uint32_t at = wgmma_tile_offset(kSlice, jc, tr / 8) + (tr % 8) * 2;
          const __nv_bfloat16 hi = __float2bfloat16_rn(x);
          *reinterpret_cast<__nv_bfloat16*>(dt_bytes + at) = hi;
          *reinterpret_cast<__nv_bfloat16*>(dtlo_bytes + at) = __float2bfloat16_rn(x - __bfloat162float(hi));
        }
      fence_proxy_async_shared();
    }
    __syncthreads();  // the weighted Δᵀ whole; S₀'s tile free

    // S = γ_C S₀ + Kᵀ diag(e^{G_C−G_t}) Δ: K_hiᵀ Δ_hi + K_loᵀ Δ_hi + K_hiᵀ Δ_lo per 16 rows of the
    // chunk, in the mma.sync kernel's order.
#pragma unroll
    for (int i = 0; i < 32; ++i) s[i] *= gamma;
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < kC / 16; ++ks) {
      const uint64_t b_hi = wgmma_desc(dt_tile + ks * 32, 16, 1024), b_lo = wgmma_desc(dtlo_tile + ks * 32, 16, 1024);
      wgmma_64x64_rs(s, khi[ks], b_hi, 1);
      wgmma_64x64_rs(s, klo[ks], b_hi, 1);
      wgmma_64x64_rs(s, khi[ks], b_lo, 1);
    }
    wgmma_commit();
    wgmma_wait<0>();
    wgmma_hold(s);
  }

#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const int col = j0 + 8 * j + 2 * t;
    *reinterpret_cast<float2*>(state + srow * kD + col) = make_float2(s[4 * j + 0], s[4 * j + 1]);
    *reinterpret_cast<float2*>(state + (srow + 8) * kD + col) = make_float2(s[4 * j + 2], s[4 * j + 3]);
  }
  // The last chunk is signalled with the final state stored (as the mma.sync kernel does).
  __syncthreads();
  if (tid == 0 && sp.chunks > 0) signal_ready(work.ready + int64_t{sp.first_chunk + sp.chunks - 1} * p.nv + hv);
}

}  // namespace

std::size_t state_wgmma_shared_bytes() { return kSmemBytes; }

void launch_state_wgmma(const DeltaNetDecodeArgs& p, const Work& work, int spans, cudaStream_t stream) {
  if (state_slice_columns(p.nv) != kSlice) fail("deltanet_prefill: the wgmma state kernel takes blocks of 64 state columns");
  QWENRT_CUDA_CHECK(cudaFuncSetAttribute(state_wgmma_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kSmemBytes)));
  state_wgmma_kernel<<<dim3(kD / kSlice, p.nv, spans), kThreads, kSmemBytes, stream>>>(p, work);
  QWENRT_CUDA_CHECK_LAUNCH();
}

}  // namespace qwenrt::cuda::deltanet_chunks
