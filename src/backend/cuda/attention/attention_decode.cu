// Decode attention: one query row per sequence against its paged KV cache, split along the keys
// (flash-decoding) with an f32 online softmax, then a merge of the splits (attention_decode.h).
#include "backend/cuda/attention/attention_decode.h"
#include "backend/cuda/attention/attention_tiles.cuh"
#include "backend/cuda/ptx/mma.cuh"
#include "backend/cuda/runtime/chained_launch.h"
#include "backend/cuda/runtime/cuda_check.h"

namespace qwenrt::cuda {
namespace {

constexpr int kDh = kAttentionHeadDim;
constexpr int kWarps = 2;
constexpr int kKeysPerWarp = 16;                  // one k16 step of the P·V product
constexpr int kTileKeys = kWarps * kKeysPerWarp;  // keys per pipeline stage
constexpr int kStages = 3;                        // tiles in flight: two loading while one is used
constexpr int kTileBytes = kTileKeys * kHeadRowBytes;
constexpr int kSmemBytes = 2 * kStages * kTileBytes;  // K and V stages: 96 KB, two blocks per SM
constexpr int kDSteps = kDh / 16;                     // k16 steps over the head dims; also O's m16 tiles
static_assert(kDecodeSplitAlign % kTileKeys == 0, "splits are whole tiles");
static_assert(kDecodeMinSplitKeys % kDecodeSplitAlign == 0, "the minimum split is aligned");
static_assert(kDecodeMaxSplits <= kDh, "the merge loads one log-sum-exp per thread");

struct DecodeParams {
  const __nv_bfloat16* q;
  const float* qg;
  const int32_t* positions;
  PagedKv kv;
  int num_q_heads, group, max_splits;
  float scale_log2;  // Dh^-1/2 · log2(e): softmax in base 2
  float* o_part;     // [batch, num_q_heads, max_splits, Dh]: each split's output, already divided by its sum
  float* lse_part;   // [batch, num_q_heads, max_splits]: each split's log2-sum-exp2 of the scaled scores
  __nv_bfloat16* out;
  bool early_tiles;  // tiles before the one holding the row's own position may load before the wait
};

// Block (split, kv head, sequence). Both warps run the same loop over 32-key tiles, warp w taking
// keys 16w..16w+15 of each, with its own online softmax; they merge at the end.
//
// The products are arranged so that each one's output is the next one's input in registers:
//   S  = q·Kᵀ    A = q (rows: the group's query heads, padded to 16 with zeros), B = K from shared
//                memory; lane (g, t) gets S[head g][keys 2t, 2t+1] of each 8-key n-tile.
//   Oᵀ += Vᵀ·Pᵀ  A = Vᵀ (ldmatrix.trans of the V rows), B = Pᵀ, whose fragment (keys 2t.., head g)
//                is exactly the bf16 pair of S above; Oᵀ[d][head] wastes no rows, 64 registers.
__global__ void __launch_bounds__(kWarps * 32) attention_decode_split_kernel(DecodeParams p) {
  extern __shared__ __align__(128) unsigned char smem[];
  const int split = blockIdx.x, hk = blockIdx.y, b = blockIdx.z;
  // Positions and block tables are uploaded before the step's first kernel: read before the wait.
  const int len = p.positions[b] + 1;
  const int split_keys = static_cast<int>(decode_split_keys(len));
  const int start = split * split_keys;
  if (start >= len) return;  // this sequence has fewer splits than the longest in the batch
  const int end = min(len, start + split_keys);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int32_t* table = p.kv.block_tables + static_cast<int64_t>(b) * p.kv.max_blocks_per_seq;
  const uint32_t k_smem = static_cast<uint32_t>(__cvta_generic_to_shared(smem)), v_smem = k_smem + kStages * kTileBytes;

  // A warp copies key rows warp, warp+2, ... of each tile. Lane j looks up the cache offset of the
  // warp's j-th row one tile ahead of its copies, so the block-table read is off the critical path.
  const int tiles = (end - start + kTileKeys - 1) / kTileKeys;
  constexpr int kRowsPerWarp = kTileKeys / kWarps;
  auto lookup = [&](int tile) -> int64_t {
    const int pos = start + tile * kTileKeys + warp + kWarps * (lane % kRowsPerWarp);
    return tile < tiles && pos < end ? paged_offset(p.kv, table, pos, hk) : 0;
  };
  auto copy_tile = [&](int tile, int64_t offsets) {
    const uint32_t stage = (tile % kStages) * kTileBytes;
#pragma unroll
    for (int j = 0; j < kRowsPerWarp; ++j) {
      const int row = warp + kWarps * j;
      const int64_t off = __shfl_sync(0xffffffffu, offsets, j);
      const bool valid = start + tile * kTileKeys + row < end;
      copy_head_row_async(k_smem + stage, row, p.kv.k + off, valid, lane);
      copy_head_row_async(v_smem + stage, row, p.kv.v + off, valid, lane);
    }
  };
  // The first stages go out before the wait on attention_prepare, except from the tile that holds
  // the row's own position, which that kernel writes (and the stages after it, which keep their
  // order): the other keys were cached by earlier steps. Not in committed steps, where that kernel
  // also writes the positions of the rows before this one, in any tile.
  int s0 = 0;
  for (; p.early_tiles && s0 < kStages - 1 && !(s0 == tiles - 1 && end == len); ++s0) {
    if (s0 < tiles) copy_tile(s0, lookup(s0));
    cp_async_commit();
  }
  chained_kernel_start();
  for (int s = s0; s < kStages - 1; ++s) {
    if (s < tiles) copy_tile(s, lookup(s));
    cp_async_commit();
  }
  int64_t next_offsets = lookup(kStages - 1);

  // Query fragments for all 16 k-steps, read once: lane (g, t) holds head g's dims 16k+2t.. and
  // 16k+8+2t..; rows g+8 of A (and heads past the group) are zero.
  uint32_t qa[kDSteps][2];
  {
    const bool head = g < p.group;
    const uint32_t* qrow = reinterpret_cast<const uint32_t*>(p.q + (static_cast<int64_t>(b) * p.num_q_heads + hk * p.group + (head ? g : 0)) * kDh);
#pragma unroll
    for (int k = 0; k < kDSteps; ++k) {
      qa[k][0] = head ? __ldg(qrow + 8 * k + t) : 0u;
      qa[k][1] = head ? __ldg(qrow + 8 * k + 4 + t) : 0u;
    }
  }

  float o[kDSteps][4] = {};                  // Oᵀ tile i: dims 16i+g (0,1) and 16i+8+g (2,3), heads 2t (0,2) and 2t+1 (1,3)
  float m_run = -INFINITY;                   // running max of head g's scaled scores (the same in the lane's quad)
  float l_run = 0;                           // this lane's share of head g's running sum
  const int mi = lane / 8, mrow = lane % 8;  // the ldmatrix matrix and row this lane addresses
  const int key0 = warp * kKeysPerWarp;

  for (int tile = 0; tile < tiles; ++tile) {
    cp_async_wait<kStages - 2>();
    __syncthreads();  // tile's copies have landed for all threads, and tile-1's stage is no longer read
    if (tile + kStages - 1 < tiles) copy_tile(tile + kStages - 1, next_offsets);
    cp_async_commit();
    next_offsets = lookup(tile + kStages);
    const uint32_t kt = k_smem + (tile % kStages) * kTileBytes, vt = v_smem + (tile % kStages) * kTileBytes;

    // S = q·Kᵀ over this warp's 16 keys; matrices: keys 0-7 | 0-7 | 8-15 | 8-15 at dims
    // 16k.. | 16k+8.. | 16k.. | 16k+8.. give b0, b1 of n-tile 0 and b0, b1 of n-tile 1.
    float s[2][4] = {};
#pragma unroll
    for (int k = 0; k < kDSteps; ++k) {
      uint32_t kb[4];
      ldmatrix_x4(kb, kt + swizzled(key0 + (mi / 2) * 8 + mrow, 2 * k + mi % 2));
      mma_bf16_16816(s[0], qa[k][0], 0u, qa[k][1], 0u, kb[0], kb[1]);
      mma_bf16_16816(s[1], qa[k][0], 0u, qa[k][1], 0u, kb[2], kb[3]);
    }

    // Online softmax for head g over keys 2t, 2t+1 (n-tile 0) and 8+2t, 9+2t (n-tile 1).
    const int kpos = start + tile * kTileKeys + key0 + 2 * t;
    float sc[4] = {s[0][0], s[0][1], s[1][0], s[1][1]};
    float mx = -INFINITY;
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int key = kpos + (e & 1) + (e / 2) * 8;
      sc[e] = key < end ? sc[e] * p.scale_log2 : -INFINITY;
      mx = fmaxf(mx, sc[e]);
    }
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    const float m_new = fmaxf(m_run, mx);
    const float m_use = m_new == -INFINITY ? 0.0f : m_new;  // a warp whose keys are all masked so far
    const float alpha = exp2f(m_run - m_use);
    m_run = m_new;
    // P in bf16 for the tensor cores; the sum takes the rounded values, so the output is exactly a
    // weighted mean of the V rows with the weights the product used.
    uint32_t pb[2];
    float psum = 0;
#pragma unroll
    for (int n = 0; n < 2; ++n) {
      pb[n] = pack_bf16(exp2f(sc[2 * n] - m_use), exp2f(sc[2 * n + 1] - m_use));
      const float2 r = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&pb[n]));
      psum += r.x + r.y;
    }
    l_run = l_run * alpha + psum;

    // Oᵀ's columns are heads 2t and 2t+1, whose factors live in lanes 8t and 8t+4.
    const float a_lo = __shfl_sync(0xffffffffu, alpha, 8 * t), a_hi = __shfl_sync(0xffffffffu, alpha, 8 * t + 4);
    // Oᵀ += Vᵀ·Pᵀ; matrices (transposed): keys 0-7 | 0-7 | 8-15 | 8-15 at dims 16i.. | 16i+8.. |
    // 16i.. | 16i+8.. give a0..a3 of dim tile i.
#pragma unroll
    for (int i = 0; i < kDSteps; ++i) {
      uint32_t va[4];
      ldmatrix_x4_trans(va, vt + swizzled(key0 + (mi / 2) * 8 + mrow, 2 * i + mi % 2));
      o[i][0] *= a_lo, o[i][1] *= a_hi, o[i][2] *= a_lo, o[i][3] *= a_hi;
      mma_bf16_16816(o[i], va[0], va[1], va[2], va[3], pb[0], pb[1]);
    }
  }

  // Merge the warps: each leaves (max, sum, Oᵀ fragments) in shared memory, the first combines.
  cp_async_wait<0>();
  __syncthreads();                                // every stage is free to reuse
  float* red_m = reinterpret_cast<float*>(smem);  // [kWarps][8]
  float* red_l = red_m + kWarps * 8;              // [kWarps][8]
  float* red_o = red_l + kWarps * 8;              // [kWarps][kDSteps * 4][32]: fragment, lane
  l_run += __shfl_xor_sync(0xffffffffu, l_run, 1);
  l_run += __shfl_xor_sync(0xffffffffu, l_run, 2);
  if (t == 0) red_m[warp * 8 + g] = m_run, red_l[warp * 8 + g] = l_run;
#pragma unroll
  for (int i = 0; i < kDSteps; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) red_o[(warp * kDSteps * 4 + i * 4 + e) * 32 + lane] = o[i][e];
  __syncthreads();
  if (warp != 0) return;

  // For this lane's heads 2t + c: the block's max, each warp's weight, and the log2-sum-exp2.
  float wgt[2][kWarps], lse[2];
#pragma unroll
  for (int c = 0; c < 2; ++c) {
    const int h = 2 * t + c;
    float mx = -INFINITY;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) mx = fmaxf(mx, red_m[w * 8 + h]);  // finite: warp 0 holds key `start`
    float sum = 0;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      wgt[c][w] = exp2f(red_m[w * 8 + h] - mx);
      sum += wgt[c][w] * red_l[w * 8 + h];
    }
#pragma unroll
    for (int w = 0; w < kWarps; ++w) wgt[c][w] /= sum;
    lse[c] = mx + log2f(sum);
  }
#pragma unroll
  for (int c = 0; c < 2; ++c) {
    const int h = 2 * t + c;
    if (h >= p.group) continue;
    const int64_t row = (static_cast<int64_t>(b) * p.num_q_heads + hk * p.group + h) * p.max_splits + split;
    float* dst = p.o_part + row * kDh;
#pragma unroll
    for (int i = 0; i < kDSteps; ++i)
#pragma unroll
      for (int e = c; e < 4; e += 2) {
        float v = 0;
#pragma unroll
        for (int w = 0; w < kWarps; ++w) v += wgt[c][w] * red_o[(w * kDSteps * 4 + i * 4 + e) * 32 + lane];
        dst[16 * i + g + (e / 2) * 8] = v;
      }
    if (g == 0) p.lse_part[row] = lse[c];
  }
}

// Block (query head, sequence), thread d: the splits' outputs weighted by exp2(lse - max), in split
// order, then the gate.
__global__ void __launch_bounds__(kDh) attention_decode_combine_kernel(DecodeParams p) {
  const int h = blockIdx.x, b = blockIdx.y, d = threadIdx.x;
  const int64_t len = p.positions[b] + 1;  // uploaded before the step: read before the wait
  const int n = static_cast<int>(decode_splits(len));
  chained_kernel_start();
  const int64_t row = static_cast<int64_t>(b) * p.num_q_heads + h;
  const float* part = p.o_part + row * p.max_splits * kDh + d;
  const float gate = p.qg[row * 2 * kDh + kDh + d];
  // The splits' log-sum-exps through shared memory (one load each), the partial outputs 16 loads at
  // a time: a few L2 round trips rather than one per split. Sums still in split order.
  __shared__ float lse[kDecodeMaxSplits];
  if (d < n) lse[d] = p.lse_part[row * p.max_splits + d];
  __syncthreads();
  float mx = -INFINITY;
  for (int s = 0; s < n; ++s) mx = fmaxf(mx, lse[s]);
  float sum = 0, acc = 0;
  constexpr int kBatch = 16;
  for (int s0 = 0; s0 < n; s0 += kBatch) {
    float v[kBatch];
#pragma unroll
    for (int j = 0; j < kBatch; ++j) v[j] = s0 + j < n ? part[static_cast<int64_t>(s0 + j) * kDh] : 0.0f;
#pragma unroll
    for (int j = 0; j < kBatch; ++j) {
      if (s0 + j >= n) break;
      const float w = exp2f(lse[s0 + j] - mx);
      sum += w;
      acc += w * v[j];
    }
  }
  p.out[row * kDh + d] = __float2bfloat16_rn(n > 0 ? acc / sum * sigmoid(gate) : 0.0f);
}

}  // namespace

std::size_t attention_decode_shared_bytes() { return kSmemBytes; }

std::size_t attention_decode_workspace_bytes(int64_t batch, int num_q_heads, int64_t max_seq_len) {
  const int64_t splits = decode_max_splits(max_seq_len);
  return static_cast<std::size_t>(batch * num_q_heads * splits * (kDh + 1)) * sizeof(float);
}

void attention_decode(const __nv_bfloat16* q, const float* qg, const int32_t* positions, int64_t batch, int num_q_heads, int64_t max_seq_len,
                      const PagedKv& kv, void* workspace, std::size_t workspace_bytes, __nv_bfloat16* out, cudaStream_t stream, bool committed) {
  check_paged_kv(kv, "attention_decode");
  if (batch < 1 || batch > 65535) fail("attention_decode: batch ", batch, " (1 to 65535)");
  if (num_q_heads < 1 || num_q_heads % kv.num_kv_heads != 0 || num_q_heads / kv.num_kv_heads > kDecodeMaxGroup)
    fail("attention_decode: ", num_q_heads, " query heads over ", kv.num_kv_heads, " kv heads (needs a multiple, at most ", kDecodeMaxGroup,
         " per kv head)");
  if (max_seq_len < 1 || max_seq_len > static_cast<int64_t>(kv.max_blocks_per_seq) * kv.block_size)
    fail("attention_decode: max_seq_len ", max_seq_len, " (1 to the block tables' ", static_cast<int64_t>(kv.max_blocks_per_seq) * kv.block_size,
         " positions)");
  if (!q || !qg || !positions || !out || !workspace) fail("attention_decode: null input, output or workspace pointer");
  if ((reinterpret_cast<uintptr_t>(q) | reinterpret_cast<uintptr_t>(workspace)) % 16 != 0)
    fail("attention_decode: q and the workspace must be 16-byte aligned");
  const std::size_t need = attention_decode_workspace_bytes(batch, num_q_heads, max_seq_len);
  if (workspace_bytes < need) fail("attention_decode: workspace of ", workspace_bytes, " bytes, needs ", need);

  DecodeParams p{};
  p.q = q, p.qg = qg, p.positions = positions, p.kv = kv, p.out = out;
  p.early_tiles = !committed;
  p.num_q_heads = num_q_heads, p.group = num_q_heads / kv.num_kv_heads;
  p.max_splits = static_cast<int>(decode_max_splits(max_seq_len));
  p.scale_log2 = 1.4426950408889634f / 16.0f;  // log2(e) / sqrt(256)
  p.o_part = static_cast<float*>(workspace);
  p.lse_part = p.o_part + batch * num_q_heads * p.max_splits * kDh;

  QWENRT_CUDA_CHECK(cudaFuncSetAttribute(attention_decode_split_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
  const dim3 grid(static_cast<unsigned>(p.max_splits), static_cast<unsigned>(kv.num_kv_heads), static_cast<unsigned>(batch));
  launch_chained(attention_decode_split_kernel, grid, dim3(kWarps * 32), kSmemBytes, stream, p);
  QWENRT_CUDA_CHECK_LAUNCH();
  launch_chained(attention_decode_combine_kernel, dim3(static_cast<unsigned>(num_q_heads), static_cast<unsigned>(batch)), dim3(kDh), 0, stream, p);
  QWENRT_CUDA_CHECK_LAUNCH();
}

}  // namespace qwenrt::cuda
