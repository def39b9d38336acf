#include "backend/cuda/attention_prefill.h"

#include "backend/cuda/attention_tiles.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/mma.cuh"

namespace qwenrt::cuda {
namespace {

constexpr int kDh = kAttentionHeadDim;
constexpr int kWarps = 8;
constexpr int kTileRows = kWarps * 16;  // (row, head) pairs per block: one m16 tile per warp
constexpr int kTileKeys = 64;
constexpr int kQBytes = kTileRows * kHeadRowBytes;    // 64 KB
constexpr int kKvBytes = kTileKeys * kHeadRowBytes;   // 32 KB each for K and V
constexpr int kSmemBytes = kQBytes + 2 * kKvBytes;    // 128 KB: one block per SM
constexpr int kDSteps = kDh / 16;                     // k16 steps of q·Kᵀ
constexpr int kDTiles = kDh / 8;                      // n8 tiles of the output
constexpr int kKeyRowsPerWarp = kTileKeys / kWarps;   // K/V rows each warp copies per tile

struct PrefillParams {
  const __nv_bfloat16* q;
  const float* qg;
  PrefillWindows w;
  PagedKv kv;
  int num_q_heads, group;
  float scale_log2;  // Dh^-1/2 · log2(e): softmax in base 2
  __nv_bfloat16* out;
};

// Block (kv head, tile). A sequence's window is a [rows × group] matrix of (row, head) pairs; tile
// i of it is pairs [128i, 128i+128), and warp w owns pairs 16w..16w+15 of the tile. The block walks
// the key tiles [0, the tile's last position] as flash-attention 2 does: V(j) loads during q·K(j)ᵀ
// and the softmax, K(j+1) during P·V(j), one buffer each.
//
//   S = q·Kᵀ  A = q from shared memory (ldmatrix), B = K rows (ldmatrix): lane (g, t) gets rows g
//             and g+8, keys 2t, 2t+1 of each 8-key n-tile
//   O += P·V  A = P, the bf16 pairs of S in place; B = V rows (ldmatrix.trans)
__global__ void __launch_bounds__(kWarps * 32, 1) attention_prefill_kernel(PrefillParams p) {
  extern __shared__ __align__(128) unsigned char smem[];
  const int hk = static_cast<int>(blockIdx.x % p.kv.num_kv_heads);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int mi = lane / 8, mrow = lane % 8;  // the ldmatrix matrix and row this lane addresses

  // Which sequence and tile: counted from the end, so the tiles with the most keys start first
  // (the kv heads of one tile are neighbours in the launch order).
  int tile = static_cast<int>(gridDim.x / p.kv.num_kv_heads - 1 - blockIdx.x / p.kv.num_kv_heads), s = 0;
  for (; s < p.w.num_seqs; ++s) {
    const int tiles = ((p.w.first_row[s + 1] - p.w.first_row[s]) * p.group + kTileRows - 1) / kTileRows;
    if (tile < tiles) break;
    tile -= tiles;
  }
  if (s == p.w.num_seqs) return;
  const int row0 = p.w.first_row[s], m_rows = (p.w.first_row[s + 1] - row0) * p.group, m0 = tile * kTileRows;
  const int min_pos = p.w.positions[row0 + m0 / p.group];
  const int max_pos = p.w.positions[row0 + (min(m0 + kTileRows, m_rows) - 1) / p.group];
  const int32_t* table = p.kv.block_tables + static_cast<int64_t>(s) * p.kv.max_blocks_per_seq;
  const uint32_t q_smem = static_cast<uint32_t>(__cvta_generic_to_shared(smem)), k_smem = q_smem + kQBytes,
                 v_smem = k_smem + kKvBytes;

  // The query tile; pairs past the window are zero-filled.
#pragma unroll 4
  for (int j = 0; j < kTileRows / kWarps; ++j) {
    const int r = warp + kWarps * j, m = m0 + r;
    const bool valid = m < m_rows;
    const int64_t src = valid ? (static_cast<int64_t>(row0 + m / p.group) * p.num_q_heads + hk * p.group + m % p.group) * kDh : 0;
    copy_head_row_async(q_smem, r, p.q + src, valid, lane);
  }
  // K/V rows: warp copies rows warp, warp+8, ... of a key tile; lane j looks up the cache offset of
  // the warp's j-th row one step before the copies need it. Keys past max_pos are zero-filled.
  const int key_tiles = max_pos / kTileKeys + 1;
  auto lookup = [&](int kt) -> int64_t {
    const int pos = kt * kTileKeys + warp + kWarps * (lane % kKeyRowsPerWarp);
    return kt < key_tiles && pos <= max_pos ? paged_offset(p.kv, table, pos, hk) : 0;
  };
  auto copy_keys = [&](uint32_t dst, const __nv_bfloat16* pool, int kt, int64_t offsets) {
#pragma unroll
    for (int j = 0; j < kKeyRowsPerWarp; ++j) {
      const int row = warp + kWarps * j;
      const int64_t off = __shfl_sync(0xffffffffu, offsets, j);
      copy_head_row_async(dst, row, pool + off, kt * kTileKeys + row <= max_pos, lane);
    }
  };
  int64_t offsets = lookup(0);
  copy_keys(k_smem, p.kv.k, 0, offsets);
  cp_async_commit();

  // Positions of the lane's two rows (g and g+8 of the warp's 16); -1 for padding, masked everywhere.
  int qpos[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int m = m0 + 16 * warp + g + 8 * h;
    qpos[h] = m < m_rows ? p.w.positions[row0 + m / p.group] : -1;
  }

  float o[kDTiles][4] = {};  // O tile j: rows g (0,1) and g+8 (2,3), dims 8j+2t, 8j+2t+1
  float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0, 0};
  for (int kt = 0; kt < key_tiles; ++kt) {
    cp_async_wait<0>();
    __syncthreads();  // K(kt) and q have landed for everyone; nobody reads V(kt-1) any more
    copy_keys(v_smem, p.kv.v, kt, offsets);
    cp_async_commit();
    const int64_t next = lookup(kt + 1);

    // S = q·Kᵀ for 64 keys: matrices for K pair n: keys 16n+0-7 | 0-7 | 8-15 | 8-15 at dims
    // 16k.. | 16k+8.. | 16k.. | 16k+8.. give b0, b1 of n-tiles 2n and 2n+1.
    float s[kTileKeys / 8][4] = {};
#pragma unroll
    for (int k = 0; k < kDSteps; ++k) {
      uint32_t qa[4];
      ldmatrix_x4(qa, q_smem + swizzled(16 * warp + (mi % 2) * 8 + mrow, 2 * k + mi / 2));
#pragma unroll
      for (int n = 0; n < kTileKeys / 16; ++n) {
        uint32_t kb[4];
        ldmatrix_x4(kb, k_smem + swizzled(16 * n + (mi / 2) * 8 + mrow, 2 * k + mi % 2));
        mma_bf16_16816(s[2 * n], qa[0], qa[1], qa[2], qa[3], kb[0], kb[1]);
        mma_bf16_16816(s[2 * n + 1], qa[0], qa[1], qa[2], qa[3], kb[2], kb[3]);
      }
    }

    // Online softmax of rows g (h = 0) and g+8 (h = 1). Only tiles reaching past the block's first
    // position need the causal mask (keys past max_pos are there too).
    const bool mask = kt * kTileKeys + kTileKeys - 1 > min_pos;
    float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int n = 0; n < kTileKeys / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int key = kt * kTileKeys + 8 * n + 2 * t + (e & 1);
        s[n][e] = mask && key > qpos[e / 2] ? -INFINITY : s[n][e] * p.scale_log2;
        mx[e / 2] = fmaxf(mx[e / 2], s[n][e]);
      }
    float m_use[2], alpha[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 1));
      mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 2));
      const float m_new = fmaxf(m_run[h], mx[h]);
      m_use[h] = m_new == -INFINITY ? 0.0f : m_new;  // a row with every key so far masked
      alpha[h] = exp2f(m_run[h] - m_use[h]);
      m_run[h] = m_new;
    }
    // P as the A operand of 16-key steps: a0/a2 row g, a1/a3 row g+8, keys 2t.. / 8+2t... The
    // sums take the bf16-rounded weights the product uses.
    uint32_t pa[kTileKeys / 16][4];
    float psum[2] = {0, 0};
#pragma unroll
    for (int kb = 0; kb < kTileKeys / 16; ++kb)
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        const int h = q % 2, n = 2 * kb + q / 2;
        pa[kb][q] = pack_bf16(exp2f(s[n][2 * h] - m_use[h]), exp2f(s[n][2 * h + 1] - m_use[h]));
        const float2 r = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&pa[kb][q]));
        psum[h] += r.x + r.y;
      }
#pragma unroll
    for (int h = 0; h < 2; ++h) l_run[h] = l_run[h] * alpha[h] + psum[h];
#pragma unroll
    for (int j = 0; j < kDTiles; ++j) o[j][0] *= alpha[0], o[j][1] *= alpha[0], o[j][2] *= alpha[1], o[j][3] *= alpha[1];

    cp_async_wait<0>();
    __syncthreads();  // V(kt) has landed for everyone; nobody reads K(kt) any more
    if (kt + 1 < key_tiles) copy_keys(k_smem, p.kv.k, kt + 1, next);
    cp_async_commit();
    offsets = next;

    // O += P·V: matrices (transposed) for key step kb and dim pair j: keys 16kb+0-7 | 8-15 | 0-7 |
    // 8-15 at dims 16j.. | 16j.. | 16j+8.. | 16j+8.. give b0, b1 of dim tiles 2j and 2j+1.
#pragma unroll
    for (int kb = 0; kb < kTileKeys / 16; ++kb)
#pragma unroll
      for (int j = 0; j < kDTiles / 2; ++j) {
        uint32_t vb[4];
        ldmatrix_x4_trans(vb, v_smem + swizzled(16 * kb + (mi % 2) * 8 + mrow, 2 * j + mi / 2));
        mma_bf16_16816(o[2 * j], pa[kb][0], pa[kb][1], pa[kb][2], pa[kb][3], vb[0], vb[1]);
        mma_bf16_16816(o[2 * j + 1], pa[kb][0], pa[kb][1], pa[kb][2], pa[kb][3], vb[2], vb[3]);
      }
  }

  // out = O / l · sigmoid(gate), for the pairs that exist (each has key 0 unmasked, so l > 0).
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    l_run[h] += __shfl_xor_sync(0xffffffffu, l_run[h], 1);
    l_run[h] += __shfl_xor_sync(0xffffffffu, l_run[h], 2);
  }
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int m = m0 + 16 * warp + g + 8 * h;
    if (m >= m_rows) continue;
    const int64_t head_row = static_cast<int64_t>(row0 + m / p.group) * p.num_q_heads + hk * p.group + m % p.group;
    const float* gate = p.qg + head_row * 2 * kDh + kDh;
    __nv_bfloat16* dst = p.out + head_row * kDh;
    const float inv = 1.0f / l_run[h];
#pragma unroll
    for (int j = 0; j < kDTiles; ++j) {
      const int d = 8 * j + 2 * t;
      const float2 gt = *reinterpret_cast<const float2*>(gate + d);
      *reinterpret_cast<uint32_t*>(dst + d) = pack_bf16(o[j][2 * h] * inv * sigmoid(gt.x), o[j][2 * h + 1] * inv * sigmoid(gt.y));
    }
  }
}

}  // namespace

void attention_prefill(const __nv_bfloat16* q, const float* qg, const PrefillWindows& windows, int num_q_heads,
                       const PagedKv& kv, __nv_bfloat16* out, cudaStream_t stream) {
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
  if (windows.rows == 0) return;

  const PrefillParams p{q, qg, windows, kv, num_q_heads, group, 1.4426950408889634f / 16.0f, out};  // log2(e)/sqrt(256)
  // Enough blocks for every sequence's tiles: Σ ceil(rows_s·group / 128) <= rows·group/128 + num_seqs.
  const int64_t tiles = (windows.rows * group + kTileRows - 1) / kTileRows + windows.num_seqs;
  QWENRT_CUDA_CHECK(cudaFuncSetAttribute(attention_prefill_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
  attention_prefill_kernel<<<static_cast<unsigned>(tiles * kv.num_kv_heads), kWarps * 32, kSmemBytes, stream>>>(p);
  QWENRT_CUDA_CHECK_LAUNCH();
}

}  // namespace qwenrt::cuda
