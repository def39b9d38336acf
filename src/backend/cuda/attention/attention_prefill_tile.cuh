#pragma once
// What both prefill attention kernels (mma.sync, wgmma) share: the block's place in the batch, the
// paged K/V row copies, one key tile's online softmax and the gated output. A block serves one kv
// head and a tile of 128 (row, head) pairs of one sequence; warp w owns pairs 16w..16w+15, lane
// (g, t) rows g and g+8 of them. Score and output accumulators use mma.sync's m16n8 layout, n8
// tiles side by side: s[4n + e] / o[4j + e] = row g (e = 0, 1) or g+8 (e = 2, 3), column 8n+2t+(e&1).
#include <cuda_bf16.h>

#include <cstdint>

#include "backend/cuda/attention/attention_prefill.h"
#include "backend/cuda/attention/attention_tiles.cuh"
#include "backend/cuda/ptx/gate_math.cuh"
#include "backend/cuda/ptx/mma.cuh"

namespace qwenrt::cuda::prefill {

constexpr int kDh = kAttentionHeadDim;
constexpr int kWarps = 8;
constexpr int kTileRows = kWarps * 16;  // (row, head) pairs per block: one m16 slice per warp
constexpr int kTileKeys = 64;
constexpr int kKeyRowsPerWarp = kTileKeys / kWarps;  // K/V rows each warp copies per tile
constexpr int kScores = kTileKeys / 2;               // score registers per lane: 64 keys x 16 rows / 32
constexpr int kOut = kDh / 2;                        // output registers per lane: 256 dims x 16 rows / 32

struct Params {
  const __nv_bfloat16* q;
  const float* qg;
  PrefillWindows w;
  PagedKv kv;
  int num_q_heads, group;
  float scale_log2;  // Dh^-1/2 · log2(e): softmax in base 2
  __nv_bfloat16* out;
};

// The block's sequence and pair tile: tiles counted from the end, so the tiles with the most keys
// start first (the kv heads of one tile are neighbours in the launch order).
struct Tile {
  int seq, row0, m_rows, m0, min_pos, max_pos, key_tiles;
  const int32_t* table;
};
__device__ __forceinline__ bool locate_tile(const Params& p, Tile& tile) {
  int i = static_cast<int>(gridDim.x / p.kv.num_kv_heads - 1 - blockIdx.x / p.kv.num_kv_heads), s = 0;
  for (; s < p.w.num_seqs; ++s) {
    const int tiles = ((p.w.first_row[s + 1] - p.w.first_row[s]) * p.group + kTileRows - 1) / kTileRows;
    if (i < tiles) break;
    i -= tiles;
  }
  if (s == p.w.num_seqs) return false;
  tile.seq = s;
  tile.row0 = p.w.first_row[s];
  tile.m_rows = (p.w.first_row[s + 1] - tile.row0) * p.group;
  tile.m0 = i * kTileRows;
  tile.min_pos = p.w.positions[tile.row0 + tile.m0 / p.group];
  tile.max_pos = p.w.positions[tile.row0 + (min(tile.m0 + kTileRows, tile.m_rows) - 1) / p.group];
  tile.key_tiles = tile.max_pos / kTileKeys + 1;
  tile.table = p.kv.block_tables + static_cast<int64_t>(s) * p.kv.max_blocks_per_seq;
  return true;
}

// The query row of pair m of the tile (clamped to the first for padding, whose copies zero-fill).
__device__ __forceinline__ int64_t query_row_offset(const Params& p, const Tile& tile, int m) {
  return (static_cast<int64_t>(tile.row0 + m / p.group) * p.num_q_heads + blockIdx.x % p.kv.num_kv_heads * p.group + m % p.group) * kDh;
}

// Lane j of a warp looks up the cache offset of the warp's j-th K/V row of key tile kt (rows warp,
// warp + 8, ...) one step before the copies need it; keys past max_pos read nothing.
__device__ __forceinline__ int64_t key_row_offsets(const Params& p, const Tile& tile, int kt, int warp, int lane) {
  const int pos = kt * kTileKeys + warp + kWarps * (lane % kKeyRowsPerWarp);
  return kt < tile.key_tiles && pos <= tile.max_pos ? paged_offset(p.kv, tile.table, pos, static_cast<int>(blockIdx.x % p.kv.num_kv_heads)) : 0;
}

// The warp copies its rows of key tile kt from `pool` into the tile at `dst`; `offset(row, chunk)`
// is the tile's layout. Lane i takes chunk i, so each instruction moves one 512-byte row.
template <typename Layout>
__device__ __forceinline__ void copy_key_rows(uint32_t dst, const __nv_bfloat16* pool, const Tile& tile, int kt, int64_t offsets, int warp, int lane,
                                              Layout offset) {
#pragma unroll
  for (int j = 0; j < kKeyRowsPerWarp; ++j) {
    const int row = warp + kWarps * j;
    const int64_t off = __shfl_sync(0xffffffffu, offsets, j);
    cp_async16(dst + offset(row, lane), pool + off + 8 * lane, kt * kTileKeys + row <= tile.max_pos);
  }
}

// The warp copies its rows of the block's query tile (rows warp, warp + 8, ...) into the tile at
// `dst` laid out by `offset(row, chunk)`; pairs past the window are zero-filled.
template <typename Layout>
__device__ __forceinline__ void copy_query_rows(uint32_t dst, const Params& p, const Tile& tile, int warp, int lane, Layout offset) {
#pragma unroll 4
  for (int j = 0; j < kTileRows / kWarps; ++j) {
    const int r = warp + kWarps * j, m = tile.m0 + r;
    const bool valid = m < tile.m_rows;
    cp_async16(dst + offset(r, lane), p.q + (valid ? query_row_offset(p, tile, m) : 0) + 8 * lane, valid);
  }
}

// Running softmax state of the lane's two rows.
struct SoftmaxRows {
  int qpos[2];  // positions of rows g and g+8; -1 for padding (masked everywhere)
  float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0, 0};
};

// One key tile: scales and masks the scores s, updates the running max and sum, rescales the output
// accumulator o and returns P in pa as the A operand of the 16-key steps (a0/a2 row g, a1/a3 row g+8,
// keys 2t.. / 8+2t..). The sums take the bf16-rounded weights the product uses. Only tiles reaching
// past the block's first position need the causal mask (keys past max_pos are there too).
template <int NOut>
__device__ __forceinline__ void softmax_tile(float (&s)[kScores], float (&o)[NOut], uint32_t (&pa)[kTileKeys / 16][4], SoftmaxRows& r,
                                             const Tile& tile, int kt, float scale_log2, int t) {
  const bool mask = kt * kTileKeys + kTileKeys - 1 > tile.min_pos;
  float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
  for (int i = 0; i < kScores; ++i) {
    const int h = (i >> 1) & 1, key = kt * kTileKeys + 8 * (i >> 2) + 2 * t + (i & 1);
    s[i] = mask && key > r.qpos[h] ? -INFINITY : s[i] * scale_log2;
    mx[h] = fmaxf(mx[h], s[i]);
  }
  float m_use[2], alpha[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 1));
    mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 2));
    const float m_new = fmaxf(r.m_run[h], mx[h]);
    m_use[h] = m_new == -INFINITY ? 0.0f : m_new;  // a row with every key so far masked
    alpha[h] = exp2f(r.m_run[h] - m_use[h]);
    r.m_run[h] = m_new;
  }
  float psum[2] = {0, 0};
#pragma unroll
  for (int kb = 0; kb < kTileKeys / 16; ++kb)
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const int h = q % 2, n = 2 * kb + q / 2;
      pa[kb][q] = pack_bf16(exp2f(s[4 * n + 2 * h] - m_use[h]), exp2f(s[4 * n + 2 * h + 1] - m_use[h]));
      const float2 v = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&pa[kb][q]));
      psum[h] += v.x + v.y;
    }
#pragma unroll
  for (int h = 0; h < 2; ++h) r.l_run[h] = r.l_run[h] * alpha[h] + psum[h];
#pragma unroll
  for (int i = 0; i < NOut; ++i) o[i] *= alpha[(i >> 1) & 1];
}

// out = O / l · sigmoid(gate) for the lane's rows that exist (each has key 0 unmasked, so l > 0).
__device__ __forceinline__ void write_output(const Params& p, const Tile& tile, const float (&o)[kOut], SoftmaxRows& r, int warp, int g, int t) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    r.l_run[h] += __shfl_xor_sync(0xffffffffu, r.l_run[h], 1);
    r.l_run[h] += __shfl_xor_sync(0xffffffffu, r.l_run[h], 2);
  }
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int m = tile.m0 + 16 * warp + g + 8 * h;
    if (m >= tile.m_rows) continue;
    const int64_t head_row = query_row_offset(p, tile, m);
    const float* gate = p.qg + head_row * 2 + kDh;
    __nv_bfloat16* dst = p.out + head_row;
    const float inv = 1.0f / r.l_run[h];
#pragma unroll
    for (int j = 0; j < kDh / 8; ++j) {
      const int d = 8 * j + 2 * t;
      const float2 gt = *reinterpret_cast<const float2*>(gate + d);
      *reinterpret_cast<uint32_t*>(dst + d) = pack_bf16(o[4 * j + 2 * h] * inv * sigmoid(gt.x), o[4 * j + 2 * h + 1] * inv * sigmoid(gt.y));
    }
  }
}

// The lane's two row positions (-1 for padding).
__device__ __forceinline__ void init_rows(const Params& p, const Tile& tile, SoftmaxRows& r, int warp, int g) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int m = tile.m0 + 16 * warp + g + 8 * h;
    r.qpos[h] = m < tile.m_rows ? p.w.positions[tile.row0 + m / p.group] : -1;
  }
}

}  // namespace qwenrt::cuda::prefill
