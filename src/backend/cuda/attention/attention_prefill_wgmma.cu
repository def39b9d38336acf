// Prefill attention on Hopper's warpgroup products (wgmma, sm_90a). The same blocks, tiles and
// softmax as the mma.sync kernel (attention_prefill_tile.cuh), but each of the two warpgroups
// multiplies its 64 (row, head) pairs with one instruction stream that reads K, V and q straight
// from shared memory: no per-warp fragment loads, a quarter of the shared-memory traffic.
//
//   S = q·Kᵀ   per k16 step of the head dim: m64n64k16, A = q and B = K rows, both K-major
//   O += P·V   per 16-key step: m64n256k16, A = P from registers, B = V rows (N-major,
//              imm-trans-b)
//
// Tile j+1 loads while tile j is multiplied, one barrier per tile.
#include "backend/cuda/attention/attention_prefill_tile.cuh"
#include "backend/cuda/attention/attention_prefill_wgmma.h"
#include "backend/cuda/ptx/wgmma.cuh"
#include "backend/cuda/runtime/cuda_check.h"

namespace qwenrt::cuda {
namespace {

using namespace prefill;
constexpr int kQBytes = kTileRows * kHeadRowBytes;         // 64 KB
constexpr int kKvBytes = kTileKeys * kHeadRowBytes;        // 32 KB per K or V buffer
constexpr int kSmemBytes = kQBytes + 5 * kKvBytes + 1024;  // 224 KB and room to align to 1024
constexpr int kBlockBytesQ = kTileRows * 128;              // one 64-column block of the q tile
constexpr int kBlockBytesKv = kTileKeys * 128;             // one 64-column block of a K or V tile

__global__ void __launch_bounds__(kWarps * 32, 1) attention_prefill_wgmma_kernel(Params p) {
  extern __shared__ __align__(128) unsigned char smem_raw[];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4, group = warp / 4;
  Tile tile;
  if (!locate_tile(p, tile)) return;
  const uint32_t base = (static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw)) + 1023) & ~1023u;
  // q, then K in two buffers, V in three: P·V(j) runs on while tile j+1 starts (barrier, loads of
  // tile j+2, q·K(j+1)ᵀ), so V(j) is still being read when tile j+2's rows arrive.
  const uint32_t q_smem = base;
  auto k_smem = [&](int kt) { return base + kQBytes + (kt & 1) * kKvBytes; };
  auto v_smem = [&](int kt) { return base + kQBytes + (2 + kt % 3) * kKvBytes; };
  auto q_layout = [](int row, int chunk) { return wgmma_tile_offset(kTileRows, row, chunk); };
  auto kv_layout = [](int row, int chunk) { return wgmma_tile_offset(kTileKeys, row, chunk); };

  // The query tile, then K(0) and V(0).
  copy_query_rows(q_smem, p, tile, warp, lane, q_layout);
  int64_t offsets = key_row_offsets(p, tile, 0, warp, lane);
  copy_key_rows(k_smem(0), p.kv.k, tile, 0, offsets, warp, lane, kv_layout);
  copy_key_rows(v_smem(0), p.kv.v, tile, 0, offsets, warp, lane, kv_layout);
  cp_async_commit();
  offsets = key_row_offsets(p, tile, 1, warp, lane);

  SoftmaxRows rows;
  init_rows(p, tile, rows, warp, g);
  float o[kOut] = {};
  const uint32_t q_group = q_smem + group * 64 * 128;  // this warpgroup's 64 pairs
  for (int kt = 0; kt < tile.key_tiles; ++kt) {
    cp_async_wait<0>();
    fence_proxy_async_shared();
    // K(kt), V(kt) (and q) have landed for everyone, and every warpgroup is done with q·K(kt-1)ᵀ
    // and P·V(kt-2), whose buffers tile kt+1 takes.
    __syncthreads();
    if (kt + 1 < tile.key_tiles) {
      copy_key_rows(k_smem(kt + 1), p.kv.k, tile, kt + 1, offsets, warp, lane, kv_layout);
      copy_key_rows(v_smem(kt + 1), p.kv.v, tile, kt + 1, offsets, warp, lane, kv_layout);
    }
    cp_async_commit();
    offsets = key_row_offsets(p, tile, kt + 2, warp, lane);

    // S = q·Kᵀ: k16 step k reads column block k/4 of both tiles, 32 bytes further per step inside.
    float s[kScores];
    wgmma_fence();
#pragma unroll
    for (int k = 0; k < kDh / 16; ++k) {
      const uint32_t within = (k % 4) * 32;
      wgmma_64x64_ss(s, wgmma_desc(q_group + (k / 4) * kBlockBytesQ + within, 16, 1024),
                     wgmma_desc(k_smem(kt) + (k / 4) * kBlockBytesKv + within, 16, 1024), k > 0);
    }
    wgmma_commit();
    wgmma_wait<0>();  // S(kt) and P·V(kt-1)
    wgmma_hold(s);
    wgmma_hold(o);

    uint32_t pa[kTileKeys / 16][4];
    softmax_tile(s, o, pa, rows, tile, kt, p.scale_log2, t);

    // O += P·V: 16-key step kb starts 16 rows (2048 bytes) into the V tile. Not waited for here.
    wgmma_fence();
#pragma unroll
    for (int kb = 0; kb < kTileKeys / 16; ++kb) wgmma_64x256_rs_nmajor(o, pa[kb], wgmma_desc(v_smem(kt) + kb * 16 * 128, kBlockBytesKv, 1024), 1);
    wgmma_commit();
  }
  wgmma_wait<0>();
  wgmma_hold(o);
  write_output(p, tile, o, rows, warp, g, t);
}

}  // namespace

std::size_t attention_prefill_wgmma_shared_bytes() { return kSmemBytes; }

void launch_attention_prefill_wgmma(const prefill::Params& p, int64_t blocks, cudaStream_t stream) {
  auto kernel = attention_prefill_wgmma_kernel;
  QWENRT_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
  kernel<<<static_cast<unsigned>(blocks), kWarps * 32, kSmemBytes, stream>>>(p);
  QWENRT_CUDA_CHECK_LAUNCH();
}

}  // namespace qwenrt::cuda
