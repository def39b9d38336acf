// Causal prefill attention over the paged cache on mma.sync tensor cores, and the choice of this or
// the warpgroup kernel (attention_prefill_wgmma.cu) per launch (attention_prefill.h).
#include "backend/cuda/attention/attention_prefill.h"
#include "backend/cuda/attention/attention_prefill_tile.cuh"
#include "backend/cuda/attention/attention_prefill_wgmma.h"
#include "backend/cuda/attention/attention_tiles.cuh"
#include "backend/cuda/ptx/mma.cuh"
#include "backend/cuda/runtime/cuda_check.h"
#include "backend/cuda/runtime/wgmma_probe.h"

namespace qwenrt::cuda {
namespace {

using namespace prefill;
constexpr int kQBytes = kTileRows * kHeadRowBytes;   // 64 KB
constexpr int kKvBytes = kTileKeys * kHeadRowBytes;  // 32 KB each for K and V
constexpr int kSmemBytes = kQBytes + 2 * kKvBytes;   // 128 KB: one block per SM
constexpr int kDSteps = kDh / 16;                    // k16 steps of q·Kᵀ

// mma.sync version (sm_80+). The block walks the key tiles [0, the tile's last position] as
// flash-attention 2 does: V(j) loads during q·K(j)ᵀ and the softmax, K(j+1) during P·V(j), one
// buffer each; tiles in the ldmatrix-friendly swizzle of attention_tiles.cuh.
//
//   S = q·Kᵀ  A = q from shared memory (ldmatrix), B = K rows (ldmatrix): lane (g, t) gets rows g
//             and g+8, keys 2t, 2t+1 of each 8-key n-tile
//   O += P·V  A = P, the bf16 pairs of S in place; B = V rows (ldmatrix.trans)
__global__ void __launch_bounds__(kWarps * 32, 1) attention_prefill_mma_kernel(Params p) {
  extern __shared__ __align__(128) unsigned char smem[];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int mi = lane / 8, mrow = lane % 8;  // the ldmatrix matrix and row this lane addresses
  Tile tile;
  if (!locate_tile(p, tile)) return;
  const uint32_t q_smem = static_cast<uint32_t>(__cvta_generic_to_shared(smem)), k_smem = q_smem + kQBytes, v_smem = k_smem + kKvBytes;
  auto layout = [](int row, int chunk) { return swizzled(row, chunk); };

  copy_query_rows(q_smem, p, tile, warp, lane, layout);
  int64_t offsets = key_row_offsets(p, tile, 0, warp, lane);
  copy_key_rows(k_smem, p.kv.k, tile, 0, offsets, warp, lane, layout);
  cp_async_commit();

  SoftmaxRows rows;
  init_rows(p, tile, rows, warp, g);
  float o[kOut] = {};
  for (int kt = 0; kt < tile.key_tiles; ++kt) {
    cp_async_wait<0>();
    __syncthreads();  // K(kt) and q have landed for everyone; nobody reads V(kt-1) any more
    copy_key_rows(v_smem, p.kv.v, tile, kt, offsets, warp, lane, layout);
    cp_async_commit();
    const int64_t next = key_row_offsets(p, tile, kt + 1, warp, lane);

    // S = q·Kᵀ for 64 keys: matrices for K pair n: keys 16n+0-7 | 0-7 | 8-15 | 8-15 at dims
    // 16k.. | 16k+8.. | 16k.. | 16k+8.. give b0, b1 of n-tiles 2n and 2n+1.
    float s[kScores] = {};
#pragma unroll
    for (int k = 0; k < kDSteps; ++k) {
      uint32_t qa[4];
      ldmatrix_x4(qa, q_smem + swizzled(16 * warp + (mi % 2) * 8 + mrow, 2 * k + mi / 2));
#pragma unroll
      for (int n = 0; n < kTileKeys / 16; ++n) {
        uint32_t kb[4];
        ldmatrix_x4(kb, k_smem + swizzled(16 * n + (mi / 2) * 8 + mrow, 2 * k + mi % 2));
        mma_bf16_16816(*reinterpret_cast<float(*)[4]>(&s[8 * n]), qa[0], qa[1], qa[2], qa[3], kb[0], kb[1]);
        mma_bf16_16816(*reinterpret_cast<float(*)[4]>(&s[8 * n + 4]), qa[0], qa[1], qa[2], qa[3], kb[2], kb[3]);
      }
    }
    uint32_t pa[kTileKeys / 16][4];
    softmax_tile(s, o, pa, rows, tile, kt, p.scale_log2, t);

    cp_async_wait<0>();
    __syncthreads();  // V(kt) has landed for everyone; nobody reads K(kt) any more
    if (kt + 1 < tile.key_tiles) copy_key_rows(k_smem, p.kv.k, tile, kt + 1, next, warp, lane, layout);
    cp_async_commit();
    offsets = next;

    // O += P·V: matrices (transposed) for key step kb and dim pair j: keys 16kb+0-7 | 8-15 | 0-7 |
    // 8-15 at dims 16j.. | 16j.. | 16j+8.. | 16j+8.. give b0, b1 of dim tiles 2j and 2j+1.
#pragma unroll
    for (int kb = 0; kb < kTileKeys / 16; ++kb)
#pragma unroll
      for (int j = 0; j < kDh / 16; ++j) {
        uint32_t vb[4];
        ldmatrix_x4_trans(vb, v_smem + swizzled(16 * kb + (mi % 2) * 8 + mrow, 2 * j + mi / 2));
        mma_bf16_16816(*reinterpret_cast<float(*)[4]>(&o[8 * j]), pa[kb][0], pa[kb][1], pa[kb][2], pa[kb][3], vb[0], vb[1]);
        mma_bf16_16816(*reinterpret_cast<float(*)[4]>(&o[8 * j + 4]), pa[kb][0], pa[kb][1], pa[kb][2], pa[kb][3], vb[2], vb[3]);
      }
  }
  write_output(p, tile, o, rows, warp, g, t);
}

}  // namespace

bool attention_prefill_supports(PrefillKernel kernel) { return kernel == PrefillKernel::Best || kernel == PrefillKernel::Mma || wgmma_available(); }

std::size_t attention_prefill_shared_bytes() {
  return wgmma_available() ? attention_prefill_wgmma_shared_bytes() : static_cast<std::size_t>(kSmemBytes);
}

const char* prefill_kernel_name(PrefillKernel kernel) {
  switch (kernel) {
    case PrefillKernel::Best: return "best";
    case PrefillKernel::Mma: return "mma.sync";
    case PrefillKernel::Wgmma: return "wgmma";
  }
  return "?";
}

void attention_prefill(const __nv_bfloat16* q, const float* qg, const PrefillWindows& windows, int num_q_heads, const PagedKv& kv, __nv_bfloat16* out,
                       cudaStream_t stream, PrefillKernel kernel) {
  check_paged_kv(kv, "attention_prefill");
  if (num_q_heads < 1 || num_q_heads % kv.num_kv_heads != 0)
    fail("attention_prefill: ", num_q_heads, " query heads is not a multiple of ", kv.num_kv_heads, " kv heads");
  const int group = num_q_heads / kv.num_kv_heads;
  // (row, head) pair indices and the grid size are 32-bit.
  if (windows.num_seqs < 1 || windows.rows < 0 || windows.rows * group > (1ll << 30) ||
      (windows.rows * group / kTileRows + windows.num_seqs + 1) * kv.num_kv_heads > (1ll << 31) - 1)
    fail("attention_prefill: ", windows.num_seqs, " sequences and ", windows.rows, " rows");
  if (!q || !qg || !out || !windows.first_row || !windows.positions) fail("attention_prefill: null input or output pointer");
  if (reinterpret_cast<uintptr_t>(q) % 16 != 0 || reinterpret_cast<uintptr_t>(qg) % 8 != 0 || reinterpret_cast<uintptr_t>(out) % 4 != 0)
    fail("attention_prefill: q must be 16-byte aligned, qg 8 and out 4");
  if (!attention_prefill_supports(kernel))
    fail("attention_prefill: the ", prefill_kernel_name(kernel), " kernel needs an sm_90a build on a Hopper GPU");
  if (windows.rows == 0) return;

  const Params p{q, qg, windows, kv, num_q_heads, group, 1.4426950408889634f / 16.0f, out};  // log2(e)/sqrt(256)
  // Enough blocks for every sequence's tiles: Σ ceil(rows_s·group / 128) <= rows·group/128 + num_seqs.
  const int64_t blocks = ((windows.rows * group + kTileRows - 1) / kTileRows + windows.num_seqs) * kv.num_kv_heads;
  if (kernel == PrefillKernel::Best) kernel = wgmma_available() ? PrefillKernel::Wgmma : PrefillKernel::Mma;
  if (kernel != PrefillKernel::Mma) return launch_attention_prefill_wgmma(p, blocks, stream);
  QWENRT_CUDA_CHECK(cudaFuncSetAttribute(attention_prefill_mma_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
  attention_prefill_mma_kernel<<<static_cast<unsigned>(blocks), kWarps * 32, kSmemBytes, stream>>>(p);
  QWENRT_CUDA_CHECK_LAUNCH();
}

}  // namespace qwenrt::cuda
