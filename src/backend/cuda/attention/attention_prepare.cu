// The per-row step before attention: q/k head RMSNorm, RoPE, the bf16 query, and K and V written
// into the paged cache (attention_prepare.h).
#include <cmath>

#include "backend/cuda/attention/attention_prepare.h"
#include "backend/cuda/attention/attention_tiles.cuh"
#include "backend/cuda/runtime/chained_launch.h"
#include "backend/cuda/runtime/cuda_check.h"

namespace qwenrt::cuda {
namespace {

constexpr int kDh = kAttentionHeadDim;
constexpr int kWarps = 8;
constexpr int kDimsPerLane = kDh / 32;  // lane l holds dims 8l .. 8l+7 of a head
static_assert(kDimsPerLane == 8, "one head is two float4 loads per lane");

struct InvFreq {
  float f[kDh / 2];  // rotary_dim/2 used
};

struct PrepareParams {
  AttentionRows rows;
  const float *qg, *k, *v, *q_norm, *k_norm;
  int num_q_heads, rotary_dim;
  float eps;
  PagedKv kv;
  __nv_bfloat16* q_out;
  InvFreq inv_freq;
};

__device__ __forceinline__ void load8(const float* p, float (&x)[8]) {
  const float4 a = *reinterpret_cast<const float4*>(p), b = *reinterpret_cast<const float4*>(p + 4);
  x[0] = a.x, x[1] = a.y, x[2] = a.z, x[3] = a.w, x[4] = b.x, x[5] = b.y, x[6] = b.z, x[7] = b.w;
}

__device__ __forceinline__ void store8_bf16(__nv_bfloat16* p, const float (&x)[8]) {
  const uint4 u = make_uint4(pack_bf16(x[0], x[1]), pack_bf16(x[2], x[3]), pack_bf16(x[4], x[5]), pack_bf16(x[6], x[7]));
  *reinterpret_cast<uint4*>(p) = u;
}

// Block (row, y) takes heads 8y + w, 8y + w + 8·gridDim.y, ... of the row (warp w), in the order
// query heads, key heads (both normalised and rotated), value heads (converted only); 8 dims a lane.
// Decode steps spread a row's heads over blocks (one block walking 27B's 32 heads took 8 us);
// prompts, with rows enough to fill the GPU, take one block per row (fewer angles to compute).
__global__ void __launch_bounds__(kWarps * 32) attention_prepare_kernel(PrepareParams p) {
  const int64_t r = blockIdx.x;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int nq = p.num_q_heads, nkv = p.kv.num_kv_heads;
  const int first_head = blockIdx.y * kWarps + warp, head_step = gridDim.y * kWarps;
  // Positions and block tables are uploaded before the step's first kernel: read before the wait.
  const int pos = p.rows.positions[r];
  const int seq = p.rows.seq[r];
  const int page = pos / p.kv.block_size;
  if (pos < 0 || seq < 0 || page >= p.kv.max_blocks_per_seq) __trap();
  const int64_t block = p.kv.block_tables[static_cast<int64_t>(seq) * p.kv.max_blocks_per_seq + page];
  if (block < 0 || block >= p.kv.num_blocks) __trap();
  const int64_t cache_row = (block * p.kv.block_size + (pos - page * p.kv.block_size)) * nkv * kDh;

  // Rotate-half pairs (d, d + half): the partner of this lane's dims sits `half/8` lanes away, at
  // the same slot (rotary_dim is a multiple of 16). The angle is f32 inv_freq · f32 position, as on
  // the CPU, so the two agree to the last bit of the angle.
  const int half = p.rotary_dim / 2, d0 = kDimsPerLane * lane;
  const bool rotary = d0 < p.rotary_dim, first_half = d0 < half;
  const int partner = first_half ? lane + half / kDimsPerLane : lane - half / kDimsPerLane;
  float cs[8], sn[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    cs[i] = 1.0f, sn[i] = 0.0f;
    if (rotary && first_head < nq + nkv) sincosf(p.inv_freq.f[(d0 + i) % half] * static_cast<float>(pos), &sn[i], &cs[i]);
  }
  chained_kernel_start();

  for (int h = first_head; h < nq + 2 * nkv; h += head_step) {
    const float *src, *w = nullptr;
    __nv_bfloat16* dst;
    if (h < nq) {
      src = p.qg + (r * nq + h) * 2 * kDh;
      w = p.q_norm;
      dst = p.q_out + (r * nq + h) * kDh;
    } else if (h < nq + nkv) {
      src = p.k + (r * nkv + (h - nq)) * kDh;
      w = p.k_norm;
      dst = p.kv.k + cache_row + (h - nq) * kDh;
    } else {
      src = p.v + (r * nkv + (h - nq - nkv)) * kDh;
      dst = p.kv.v + cache_row + (h - nq - nkv) * kDh;
    }
    float x[8];
    load8(src + d0, x);
    if (w) {
      float ss = 0;
#pragma unroll
      for (int i = 0; i < 8; ++i) ss += x[i] * x[i];
#pragma unroll
      for (int o = 16; o > 0; o /= 2) ss += __shfl_xor_sync(0xffffffffu, ss, o);
      const float inv = 1.0f / sqrtf(ss / kDh + p.eps);
      float wd[8];
      load8(w + d0, wd);
#pragma unroll
      for (int i = 0; i < 8; ++i) x[i] = x[i] * inv * wd[i];
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        const float other = __shfl_sync(0xffffffffu, x[i], partner);
        // x[d] = a·cos − b·sin for the first half, b·cos + a·sin for the second (a = x[d], b = x[d+half]).
        if (rotary) x[i] = first_half ? x[i] * cs[i] - other * sn[i] : x[i] * cs[i] + other * sn[i];
      }
    }
    store8_bf16(dst + d0, x);
  }
}

}  // namespace

void attention_prepare(const AttentionRows& rows, const float* qg, const float* k, const float* v, int num_q_heads, const QkNormRope& norm,
                       const PagedKv& kv, __nv_bfloat16* q_out, cudaStream_t stream) {
  check_paged_kv(kv, "attention_prepare");
  if (rows.count < 0 || rows.count > (1ll << 31) - 1) fail("attention_prepare: ", rows.count, " rows");
  if (num_q_heads < 1 || num_q_heads % kv.num_kv_heads != 0)
    fail("attention_prepare: ", num_q_heads, " query heads is not a multiple of ", kv.num_kv_heads, " kv heads");
  if (norm.rotary_dim < 16 || norm.rotary_dim > kDh || norm.rotary_dim % 16 != 0)
    fail("attention_prepare: rotary_dim ", norm.rotary_dim, " (needs a multiple of 16 up to ", kDh, ")");
  if (!(norm.eps > 0) || !(norm.theta > 1))
    fail("attention_prepare: eps ", norm.eps, " and rope theta ", norm.theta, " must be positive (theta > 1)");
  if (!qg || !k || !v || !norm.q_norm || !norm.k_norm || !q_out || !rows.positions || !rows.seq)
    fail("attention_prepare: null input or output pointer");
  if ((reinterpret_cast<uintptr_t>(qg) | reinterpret_cast<uintptr_t>(k) | reinterpret_cast<uintptr_t>(v) | reinterpret_cast<uintptr_t>(norm.q_norm) |
       reinterpret_cast<uintptr_t>(norm.k_norm) | reinterpret_cast<uintptr_t>(q_out)) %
          16 !=
      0)
    fail("attention_prepare: inputs and q_out must be 16-byte aligned");
  if (rows.count == 0) return;

  PrepareParams p{rows, qg, k, v, norm.q_norm, norm.k_norm, num_q_heads, norm.rotary_dim, norm.eps, kv, q_out, {}};
  // The same expression as rope_angles, so the CPU and GPU angles agree exactly.
  const float base = static_cast<float>(norm.theta);
  for (int d = 0; d < norm.rotary_dim / 2; ++d)
    p.inv_freq.f[d] = 1.0f / std::pow(base, static_cast<float>(2 * d) / static_cast<float>(norm.rotary_dim));
  // Rows that fill the GPU several times over: one block each.
  constexpr int64_t kSpreadRows = 512;
  const unsigned head_blocks = rows.count >= kSpreadRows ? 1u : static_cast<unsigned>((num_q_heads + 2 * kv.num_kv_heads + kWarps - 1) / kWarps);
  launch_chained(attention_prepare_kernel, dim3(static_cast<unsigned>(rows.count), head_blocks), dim3(kWarps * 32), 0, stream, p);
  QWENRT_CUDA_CHECK_LAUNCH();
}

}  // namespace qwenrt::cuda
