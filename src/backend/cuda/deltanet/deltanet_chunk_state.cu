// The `state` kernel of the chunked DeltaNet window (deltanet_prefill.h).
#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "backend/cuda/deltanet/deltanet_chunk_state.h"
#include "backend/cuda/deltanet/deltanet_chunk_state_wgmma.h"
#include "backend/cuda/deltanet/deltanet_chunks.cuh"
#include "backend/cuda/runtime/cuda_check.h"
#include "backend/cuda/runtime/runtime_options.h"
#include "backend/cuda/runtime/wgmma_probe.h"

namespace qwenrt::cuda::deltanet_chunks {
namespace {

// state: one block per (kSlice state columns, value head, span), walking the span's chunks in order
// (kSlice: state_slice_columns). The block's 128×kSlice slice of S lives in the warps' f32
// accumulators (warp w: rows 16(w%8).., columns 32(w/8)..); what the products read of it is a bf16
// copy, remade at each chunk's start.

template <int kSlice>
constexpr int state_threads() {
  return 32 * (kSlice / 4);
}  // 8 warps per 32 columns
// Row stride of the [·][kSlice] state and Δ tiles (bf16, kSlice + 8: 16 bytes more than a multiple
// of 128, as kLd128) and of the U slice (f32).
template <int kSlice>
constexpr int slice_ld() {
  return kSlice + 8;
}

// One chunk's inputs. Two of them: chunk c+1's arrive while chunk c is worked on (109 KiB in all
// with S₀ and the weighted Δ at 32 columns: two blocks per multiprocessor; 141 KiB at 64: one).
template <int kSlice>
struct StateInputs {
  alignas(16) __nv_bfloat16 w[kC][kLd128];
  alignas(16) __nv_bfloat16 k[kC][kLd128];
  alignas(16) float u[kC][slice_ld<kSlice>()];  // the block's columns
  alignas(16) float gcum[kC];
};
template <int kSlice>
struct StateSmem {
  StateInputs<kSlice> in[2];
  alignas(16) __nv_bfloat16 h[kD][slice_ld<kSlice>()];    // S₀ (k-major: row i is the k index of W S₀)
  alignas(16) __nv_bfloat16 d[kC][slice_ld<kSlice>()];    // Δ rows times e^{G_C−G_t}, hi
  alignas(16) __nv_bfloat16 dlo[kC][slice_ld<kSlice>()];  // ... lo
};

template <int kSlice>
__global__ void __launch_bounds__(state_threads<kSlice>(), kSlice == 32 ? 2 : 1) state_kernel(const DeltaNetDecodeArgs p, const Work work) {
  static_assert(kSlice == 32 || kSlice == 64, "warp w: S rows 16(w%8).., columns 32(w/8)..; Δ rows 16(w%4).., columns 16(w/4)..");
  constexpr int kStateThreads = state_threads<kSlice>(), kLdSlice = slice_ld<kSlice>();
  extern __shared__ float4 smem_raw[];
  StateSmem<kSlice>& sm = *reinterpret_cast<StateSmem<kSlice>*>(smem_raw);
  const int j0 = blockIdx.x * kSlice, hv = blockIdx.y;
  const SpanMeta sp = work.spans[blockIdx.z];
  const int hk = hv / (p.nv / p.nk);
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  // `output` (launched chained) may start once every block is here: it waits chunk by chunk on
  // Work::ready, so it runs beside this kernel on the multiprocessors it leaves free.
  grid_launch_dependents();
  float* state = p.rec_state + int64_t{sp.slot} * p.rec_slot_stride + int64_t{hv} * kD * kD;
  const uint32_t h_tile = smem_addr(&sm.h[0][0]), d_tile = smem_addr(&sm.d[0][0]), dlo_tile = smem_addr(&sm.dlo[0][0]);

  // s[nt]: rows 16(w%8) + g (+8), columns j0 + 32(w/8) + 8nt + 2t (+1).
  const int srow = 16 * (warp % 8) + g, scol = 32 * (warp / 8);
  float s[4][4];
#pragma unroll
  for (int nt = 0; nt < 4; ++nt) {
    const int col = j0 + scol + 8 * nt + 2 * t;
    const float2 lo = *reinterpret_cast<const float2*>(state + srow * kD + col);
    const float2 hi = *reinterpret_cast<const float2*>(state + (srow + 8) * kD + col);
    s[nt][0] = lo.x;
    s[nt][1] = lo.y;
    s[nt][2] = hi.x;
    s[nt][3] = hi.y;
  }

  // A chunk's W, K, U and G as one group of asynchronous copies, issued a whole chunk ahead.
  auto load = [&](int64_t c, StateInputs<kSlice>& in) {
    const int64_t head_tile = (c * p.nv + hv) * kC * kD;
    copy_tile_async<kC, kD>(&in.w[0][0], kLd128, work.w + head_tile, kD);
    copy_tile_async<kC, kD>(&in.k[0][0], kLd128, work.kn + (c * p.nk + hk) * kC * kD, kD);
    copy_tile_async<kC, kSlice>(&in.u[0][0], kLdSlice, work.u + head_tile + j0, kD);
    if (tid < kC / 4) cp_async16(&in.gcum[4 * tid], work.gcum + (c * p.nv + hv) * kC + 4 * tid);
    cp_async_commit();
  };
  if (sp.chunks > 0) load(sp.first_chunk, sm.in[0]);
  for (int ci = 0; ci < sp.chunks; ++ci) {
    const int64_t c = sp.first_chunk + ci;
    const StateInputs<kSlice>& in = sm.in[ci % 2];
    // The A fragments of K_loᵀ for the state update, straight from the workspace (there is no room
    // for a K_lo tile at two blocks per multiprocessor), laid out by `prepare` as the lanes take
    // them: A(m, k) = K_lo[k][m], m = 16w + g (+8), k = 16ks + 2t (+1, +8, +9). Requested first,
    // used after Δ.
    uint32_t klo[kC / 16][4];
    {
      const uint4* src = reinterpret_cast<const uint4*>(work.klo_frag + (c * p.nk + hk) * (kC * kD / 2)) + 32 * (warp % 8) + lane;
#pragma unroll
      for (int ks = 0; ks < kC / 16; ++ks) {
        const uint4 v = src[ks * 8 * 32];
        klo[ks][0] = v.x;
        klo[ks][1] = v.y;
        klo[ks][2] = v.z;
        klo[ks][3] = v.w;
      }
    }
    // S₀ of this chunk, rounded, to shared memory (the last reader of the previous copy was Δ of
    // the previous chunk, before its second barrier).
#pragma unroll
    for (int nt = 0; nt < 4; ++nt) {
      const int col = scol + 8 * nt + 2 * t;
      *reinterpret_cast<uint32_t*>(&sm.h[srow][col]) = pack_bf16(s[nt][0], s[nt][1]);
      *reinterpret_cast<uint32_t*>(&sm.h[srow + 8][col]) = pack_bf16(s[nt][2], s[nt][3]);
    }
    cp_async_wait<0>();  // this chunk's inputs, the only group in flight
    __syncthreads();     // ... landed for every thread; S₀ whole; the previous chunk all done
    // The previous chunk's snapshot is stored (by every thread, before the barrier): `output` may
    // take it. Signalled a chunk late, so that the release waits on no store still in flight.
    if (ci > 0 && tid == 0) signal_ready(work.ready + (c - 1) * p.nv + hv);
    // Chunk c+1 into the other buffer, whose last readers (chunk c−1) are past the barrier.
    if (ci + 1 < sp.chunks) load(c + 1, sm.in[(ci + 1) % 2]);
    // S₀ to the workspace for `output`: the slice's 128 rows of 128 bytes, 16 bytes per thread.
    {
      __nv_bfloat16* snapshot = work.h + (c * p.nv + hv) * kD * kD + j0;
      constexpr int kPieces = kD * kSlice / 8;
      static_assert(kPieces % kStateThreads == 0, "whole rounds of 16-byte pieces");
#pragma unroll
      for (int i = 0; i < kPieces / kStateThreads; ++i) {
        const int e = tid + i * kStateThreads, r = e / (kSlice / 8), c8 = e % (kSlice / 8);
        *reinterpret_cast<uint4*>(snapshot + r * kD + 8 * c8) = *reinterpret_cast<const uint4*>(&sm.h[r][8 * c8]);
      }
    }
    const float g_last = in.gcum[kC - 1], gamma = expf(g_last);
    // Δ = U − W S₀; warp w: rows 16(w%4).., columns 16(w/4)..; A = W rows, B = S₀ (k-major), the
    // accumulators starting at −U (Δ is minus their sum). To shared memory times e^{G_C−G_t}, the
    // state update's row weights, hi and lo. (`output` makes the same Δ again, the same way from
    // the same S₀ snapshot, rather than reading it: storing it from here cost this kernel a
    // quarter of its time.)
    {
      const int m0 = 16 * (warp % 4), n0 = 16 * (warp / 4);
      const uint32_t w_tile = smem_addr(&in.w[0][0]);
      const int row = m0 + g;
      float acc[2][4];
#pragma unroll
      for (int nt = 0; nt < 2; ++nt) {
        const int col = n0 + 8 * nt + 2 * t;
        const float2 u0 = *reinterpret_cast<const float2*>(&in.u[row][col]);
        const float2 u1 = *reinterpret_cast<const float2*>(&in.u[row + 8][col]);
        acc[nt][0] = -u0.x;
        acc[nt][1] = -u0.y;
        acc[nt][2] = -u1.x;
        acc[nt][3] = -u1.y;
      }
#pragma unroll
      for (int k0 = 0; k0 < kD; k0 += 16) {
        uint32_t a[4], b[4];
        load_a(a, w_tile, kLd128, m0, k0, lane);
        load_b_kn(b, h_tile, kLdSlice, k0, n0, lane);
        mma_pair(acc[0], acc[1], a, b);
      }
      const float w0 = expf(g_last - in.gcum[row]), w1 = expf(g_last - in.gcum[row + 8]);
#pragma unroll
      for (int nt = 0; nt < 2; ++nt) {
        const int col = n0 + 8 * nt + 2 * t;
        const float2 lo = make_float2(-acc[nt][0] * w0, -acc[nt][1] * w0);
        const float2 hi = make_float2(-acc[nt][2] * w1, -acc[nt][3] * w1);
        *reinterpret_cast<uint32_t*>(&sm.d[row][col]) = pack_bf16(lo.x, lo.y);
        *reinterpret_cast<uint32_t*>(&sm.d[row + 8][col]) = pack_bf16(hi.x, hi.y);
        *reinterpret_cast<uint32_t*>(&sm.dlo[row][col]) = pack_bf16_lo(lo.x, lo.y);
        *reinterpret_cast<uint32_t*>(&sm.dlo[row + 8][col]) = pack_bf16_lo(hi.x, hi.y);
      }
    }
    __syncthreads();  // the weighted Δ whole; S₀'s copy free

    // S = γ_C S₀ + Kᵀ diag(e^{G_C−G_t}) Δ: A = Kᵀ (K stored [t][i]), B = weighted Δ (k-major),
    // both split: K_hiᵀ Δ_hi + K_loᵀ Δ_hi + K_hiᵀ Δ_lo (each rounding alone would cost the carried
    // state ~1.6e-3 relative).
#pragma unroll
    for (int nt = 0; nt < 4; ++nt)
#pragma unroll
      for (int i = 0; i < 4; ++i) s[nt][i] *= gamma;
    const uint32_t k_tile = smem_addr(&in.k[0][0]);
#pragma unroll
    for (int k0 = 0; k0 < kC; k0 += 16) {
      uint32_t a[4];
      load_a_t(a, k_tile, kLd128, 16 * (warp % 8), k0, lane);
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        uint32_t b[4], blo[4];
        load_b_kn(b, d_tile, kLdSlice, k0, scol + 16 * h, lane);
        load_b_kn(blo, dlo_tile, kLdSlice, k0, scol + 16 * h, lane);
        mma_pair(s[2 * h], s[2 * h + 1], a, b);
        mma_pair(s[2 * h], s[2 * h + 1], klo[k0 / 16], b);
        mma_pair(s[2 * h], s[2 * h + 1], a, blo);
      }
    }
  }

#pragma unroll
  for (int nt = 0; nt < 4; ++nt) {
    const int col = j0 + scol + 8 * nt + 2 * t;
    *reinterpret_cast<float2*>(state + srow * kD + col) = make_float2(s[nt][0], s[nt][1]);
    *reinterpret_cast<float2*>(state + (srow + 8) * kD + col) = make_float2(s[nt][2], s[nt][3]);
  }
  // The last chunk is signalled only now, with the final state stored: once `output` has taken
  // every chunk, this kernel has no write left, whatever the stream makes of the chained launch.
  __syncthreads();
  if (tid == 0 && sp.chunks > 0) signal_ready(work.ready + int64_t{sp.first_chunk + sp.chunks - 1} * p.nv + hv);
}

template <int kSlice>
void launch_state_slices(const DeltaNetDecodeArgs& p, const Work& work, int spans, cudaStream_t stream) {
  const auto kernel = state_kernel<kSlice>;
  QWENRT_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(sizeof(StateSmem<kSlice>))));
  kernel<<<dim3(kD / kSlice, p.nv, spans), state_threads<kSlice>(), sizeof(StateSmem<kSlice>), stream>>>(p, work);
  QWENRT_CUDA_CHECK_LAUNCH();
}

}  // namespace

// Blocks of 64 columns may run on warpgroup products where the build and the GPU have them
// (deltanet_chunk_state_wgmma.cu), the default (4-5% faster on the H200; the same bits as the
// mma.sync kernel in tools/cuda_emu and within 1e-3 on the GPU); QWENRT_CUDA_STATE_WGMMA=0 runs the
// mma.sync kernel. Read at every launch, so a test can run both (ScopedRuntimeOptions).
static bool state_on_wgmma(int nv) {
  if (state_slice_columns(nv) != 64 || !wgmma_available()) return false;
  return runtime_options().state_wgmma;
}

std::size_t state_shared_bytes(int nv) {
  if (state_slice_columns(nv) == 32) return sizeof(StateSmem<32>);
  return std::max(sizeof(StateSmem<64>), state_on_wgmma(nv) ? state_wgmma_shared_bytes() : std::size_t{0});
}

void launch_state(const DeltaNetDecodeArgs& p, const Work& work, int spans, cudaStream_t stream) {
  if (work.slices * state_slice_columns(p.nv) != kD) fail("deltanet_prefill: the window's state slices do not match its heads");
  if (state_on_wgmma(p.nv)) launch_state_wgmma(p, work, spans, stream);
  else if (state_slice_columns(p.nv) == 64) launch_state_slices<64>(p, work, spans, stream);
  else launch_state_slices<32>(p, work, spans, stream);
}

}  // namespace qwenrt::cuda::deltanet_chunks
