// One Gated DeltaNet decode step in one fused kernel: conv, q/k normalisation, gates and the
// recurrent state update, one new row per sequence (deltanet_decode.h).
#include "backend/cuda/deltanet/deltanet_decode.h"
#include "backend/cuda/ptx/gate_math.cuh"
#include "backend/cuda/ptx/mma.cuh"
#include "backend/cuda/runtime/chained_launch.h"
#include "backend/cuda/runtime/cuda_check.h"

namespace qwenrt::cuda {
namespace {

constexpr int kDk = kDeltaNetDecodeHeadDim, kDv = kDeltaNetDecodeHeadDim, K = kDeltaNetDecodeConvKernel;

// One block per (sequence, value head), one thread per (column group, row group) of its state:
// the recurrence is separable over the dv columns, so a thread keeps 4 adjacent columns (one float4
// per state row) of every 4th row in registers, from the one read to the one write. The 4 row
// groups of a column group are lanes l, l^8, l^16, l^24 of one warp, so the column sums over rows
// (Sᵀk, Sᵀq) are two shuffles; and each state load of a warp covers 4 whole 128-byte lines.
// The 128 state floats per thread make it ~235 registers (no spills): two blocks per SM, so up to
// 128 KB of state loads in flight per SM, several times what keeps HBM busy.
constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
constexpr int kColGroups = kDv / 4;                // 32 float4 columns
constexpr int kRowGroups = kThreads / kColGroups;  // 4
constexpr int kRowsPerThread = kDk / kRowGroups;   // 32 float4 in registers
// The prologue gives thread t channel t of q, of k and of v.
static_assert(kThreads == kDk && kThreads == kDv, "one thread per q/k/v channel in the prologue");
static_assert(kColGroups % 8 == 0 && kRowGroups == 4, "a warp is 8 column groups x 4 row groups");

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int m = 16; m >= 1; m /= 2) v += __shfl_xor_sync(0xffffffffu, v, m);
  return v;
}

// Sum over the 4 row-group lanes of a column group; all four get the same bits.
__device__ __forceinline__ float4 row_group_sum(float4 v) {
#pragma unroll
  for (int m = 8; m <= 16; m *= 2) {
    v.x += __shfl_xor_sync(0xffffffffu, v.x, m);
    v.y += __shfl_xor_sync(0xffffffffu, v.y, m);
    v.z += __shfl_xor_sync(0xffffffffu, v.z, m);
    v.w += __shfl_xor_sync(0xffffffffu, v.w, m);
  }
  return v;
}

// Block sums of N values, every thread gets them. `scratch` is used by this call only.
template <int N>
__device__ __forceinline__ void block_sum(float (&v)[N], float (&scratch)[N][kWarps]) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
#pragma unroll
  for (int n = 0; n < N; ++n) {
    const float s = warp_sum(v[n]);
    if (lane == 0) scratch[n][warp] = s;
  }
  __syncthreads();
#pragma unroll
  for (int n = 0; n < N; ++n) {
    v[n] = 0;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) v[n] += scratch[n][w];
  }
}

__device__ __forceinline__ float4 operator*(float4 a, float s) { return make_float4(a.x * s, a.y * s, a.z * s, a.w * s); }

__global__ void __launch_bounds__(kThreads) deltanet_decode_kernel(const DeltaNetDecodeArgs p) {
  __shared__ float q_s[kDk], k_s[kDk], v_s[kDv], silu_z_s[kDv], norm_w_s[kDv];
  __shared__ float qk_scratch[2][kWarps], o_scratch[1][kWarps];

  const int hv = blockIdx.x;
  const int row = p.rows ? p.rows[blockIdx.y] : static_cast<int>(blockIdx.y);
  const int ratio = p.nv / p.nk, hk = hv / ratio;
  const int t = threadIdx.x, warp = t / 32, lane = t % 32;
  const int cg = 8 * warp + lane % 8, rg = lane / 8;  // this thread's columns 4cg.., rows 4r + rg
  // Before the wait on the kernel ahead, everything this step's projections do not produce: the
  // row's slot and position (uploaded before the step's first kernel), the state and the conv ring
  // (last written by this kernel one step earlier) and the weights. The state's 32 loads per thread
  // are then in flight while the kernel ahead finishes. A committed launch's kernel ahead may be
  // this kernel for the row before: it waits first.
  if (p.rows) chained_kernel_start();
  const int64_t slot = p.slots[row], pos = p.positions[row];

  // Read once and written once per step, so the state is streamed (evict-first) rather than kept in
  // L2. Row 4r + rg of this thread's float4 column is state4[r · kDv]: one base, constant offsets.
  float4* state4 = reinterpret_cast<float4*>(p.rec_state + slot * p.rec_slot_stride + static_cast<int64_t>(hv) * kDk * kDv + rg * kDv + 4 * cg);
  float4 s[kRowsPerThread];
#pragma unroll
  for (int r = 0; r < kRowsPerThread; ++r) s[r] = __ldcs(state4 + r * kDv);

  // Causal conv of channel t of q, k (key head hk) and v (value head hv): tap j reads the row of
  // position pos − (K−1) + j, from the ring for j < K−1 (summed here), the new row for j = K−1.
  // Position pos − (K−1) + j ≡ pos + 1 + j (mod K) sits in ring row (own + 1 + j) mod K.
  const int64_t key_dim = static_cast<int64_t>(p.nk) * kDk, conv_dim = 2 * key_dim + static_cast<int64_t>(p.nv) * kDv;
  const int64_t channel[3] = {hk * kDk + t, key_dim + hk * kDk + t, 2 * key_dim + static_cast<int64_t>(hv) * kDv + t};
  const int own = static_cast<int>(pos % K);
  float* ring = p.conv_state + slot * p.conv_slot_stride;
  float past[3], w_new[3];
#pragma unroll
  for (int c = 0; c < 3; ++c) {
    const int64_t ch = channel[c];
    const float* w = p.conv_w + ch * K;
    float acc = 0;
#pragma unroll
    for (int j = 0; j < K - 1; ++j) {
      const int r = (own + 1 + j) % K;
      acc += w[j] * (pos >= K - 1 - j ? ring[r * conv_dim + ch] : 0.0f);
    }
    past[c] = acc;
    w_new[c] = w[K - 1];
  }
  norm_w_s[t] = p.norm_w[t];
  const float neg_exp_a = p.neg_exp_a[hv], dt_bias = p.dt_bias[hv];

  chained_kernel_start();

  // Gates and the output norm's per-column factors.
  const float beta = sigmoid(p.b[row * p.ld_ba + hv]);
  const float alpha = expf(neg_exp_a * softplus(p.a[row * p.ld_ba + hv] + dt_bias));
  silu_z_s[t] = silu(p.z[row * p.ld_z + static_cast<int64_t>(hv) * kDv + t]);

  // The conv's last tap and SiLU. The ratio value heads of key head hk all read its q/k channels;
  // the first one stores them in the ring.
  // (All three loads before the first ring store: a store may alias a later load, which would
  // otherwise wait for it, one L2 round trip per channel.)
  const bool stores_qk = hv % ratio == 0;
  const float* x = p.qkv + row * p.ld_qkv;
  float x_new[3], mixed[3];
#pragma unroll
  for (int c = 0; c < 3; ++c) x_new[c] = x[channel[c]];
#pragma unroll
  for (int c = 0; c < 3; ++c) {
    mixed[c] = silu(past[c] + w_new[c] * x_new[c]);
    if (c == 2 || stores_qk) ring[own * conv_dim + channel[c]] = x_new[c];
  }
  // Speculation: the ring as it stands after this row, each channel copied by the block that writes
  // it (every ring row: the others are what the next row reads).
  float* keep = p.keep && p.keep[row] ? reinterpret_cast<float*>(p.keep[row]) : nullptr;
  if (keep) {
#pragma unroll
    for (int c = 0; c < 3; ++c) {
      if (c != 2 && !stores_qk) continue;
#pragma unroll
      for (int r = 0; r < K; ++r)
        keep[p.keep_conv_offset + r * conv_dim + channel[c]] = r == own ? x_new[c] : ring[r * conv_dim + channel[c]];
    }
  }

  // q, k: x · rsqrt(Σx² + 1e-6) · scale over the head, as cpu::l2_normalize.
  float ss[2] = {mixed[0] * mixed[0], mixed[1] * mixed[1]};
  block_sum(ss, qk_scratch);
  const float q_scale = 1.0f / sqrtf(static_cast<float>(kDk));
  q_s[t] = mixed[0] * ((1.0f / sqrtf(ss[0] + 1e-6f)) * q_scale);
  k_s[t] = mixed[1] * (1.0f / sqrtf(ss[1] + 1e-6f));
  v_s[t] = mixed[2];
  __syncthreads();

  // S ← αS, w = Sᵀk (partial over this thread's rows, then over the row groups).
  float4 w = make_float4(0, 0, 0, 0);
#pragma unroll
  for (int r = 0; r < kRowsPerThread; ++r) {
    const float ki = k_s[4 * r + rg];
    s[r] = s[r] * alpha;
    w.x += s[r].x * ki;
    w.y += s[r].y * ki;
    w.z += s[r].z * ki;
    w.w += s[r].w * ki;
  }
  w = row_group_sum(w);

  // δ = β(v − w); S ← S + kδᵀ (written back as soon as it is final); o = Sᵀq.
  const float4 v = reinterpret_cast<const float4*>(v_s)[cg];
  const float4 delta = make_float4(beta * (v.x - w.x), beta * (v.y - w.y), beta * (v.z - w.z), beta * (v.w - w.w));
  float4 o = make_float4(0, 0, 0, 0);
#pragma unroll
  for (int r = 0; r < kRowsPerThread; ++r) {
    const float ki = k_s[4 * r + rg], qi = q_s[4 * r + rg];
    s[r].x += ki * delta.x;
    s[r].y += ki * delta.y;
    s[r].z += ki * delta.z;
    s[r].w += ki * delta.w;
    o.x += s[r].x * qi;
    o.y += s[r].y * qi;
    o.z += s[r].z * qi;
    o.w += s[r].w * qi;
    __stcs(state4 + r * kDv, s[r]);
  }
  if (keep) {
    float4* keep4 = reinterpret_cast<float4*>(keep + p.keep_rec_offset + static_cast<int64_t>(hv) * kDk * kDv + rg * kDv + 4 * cg);
#pragma unroll
    for (int r = 0; r < kRowsPerThread; ++r) __stcs(keep4 + r * kDv, s[r]);
  }
  o = row_group_sum(o);

  // Gated RMSNorm over the head's dv outputs: each column counted once (row group 0).
  float o_ss[1] = {rg == 0 ? o.x * o.x + o.y * o.y + o.z * o.z + o.w * o.w : 0.0f};
  block_sum(o_ss, o_scratch);
  const float inv = 1.0f / sqrtf(o_ss[0] / static_cast<float>(kDv) + p.eps);
  if (rg == 0) {
    __nv_bfloat16* y = p.out + row * p.ld_out + static_cast<int64_t>(hv) * kDv + 4 * cg;
    const float oc[4] = {o.x, o.y, o.z, o.w};
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      const int j = 4 * cg + c;
      y[c] = __float2bfloat16_rn(oc[c] * inv * norm_w_s[j] * silu_z_s[j]);
    }
  }
}

}  // namespace

void deltanet_decode(const DeltaNetDecodeArgs& a, cudaStream_t stream) {
  if (a.dk != kDk || a.dv != kDv)
    fail("deltanet_decode: head dims dk ", a.dk, ", dv ", a.dv, " are not supported; the kernel is built for dk = dv = ", kDk);
  if (a.B < 1 || a.B > 65535) fail("deltanet_decode: ", a.B, " rows; it takes 1 to 65535");
  if (a.keep && (a.keep_rec_offset % 4 != 0 || a.keep_conv_offset < 0))
    fail("deltanet_decode: kept states need a recurrent offset that is a multiple of 4 (got ", a.keep_rec_offset, ")");
  if (a.nk < 1 || a.nv < 1 || a.nv % a.nk != 0)
    fail("deltanet_decode: ", a.nv, " value heads over ", a.nk, " key heads; needs nk >= 1 and nv a multiple of nk");
  if (a.K != K) fail("deltanet_decode: conv kernel size ", a.K, " is not supported; the kernel is built for K = ", K);
  if (!a.qkv || !a.z || !a.b || !a.a || !a.conv_w || !a.neg_exp_a || !a.dt_bias || !a.norm_w || !a.conv_state || !a.rec_state || !a.slots ||
      !a.positions || !a.out)
    fail("deltanet_decode: a null pointer among the arguments");
  const int64_t key_dim = int64_t{a.nk} * a.dk, value_dim = int64_t{a.nv} * a.dv, conv_dim = 2 * key_dim + value_dim;
  if (a.ld_qkv < conv_dim || a.ld_z < value_dim || a.ld_ba < a.nv || a.ld_out < value_dim)
    fail("deltanet_decode: row strides qkv ", a.ld_qkv, ", z ", a.ld_z, ", b/a ", a.ld_ba, ", out ", a.ld_out, " must be at least conv_dim ",
         conv_dim, ", value_dim ", value_dim, ", nv ", a.nv, ", value_dim ", value_dim);
  if (a.conv_slot_stride < a.K * conv_dim)
    fail("deltanet_decode: conv slot stride ", a.conv_slot_stride, " is less than K x conv_dim = ", a.K * conv_dim);
  if (a.rec_slot_stride < a.nv * int64_t{a.dk} * a.dv || a.rec_slot_stride % 4 != 0 || reinterpret_cast<uintptr_t>(a.rec_state) % 16 != 0)
    fail("deltanet_decode: recurrent state needs 16-byte alignment and a slot stride that is a multiple of 4 and at least nv x dk x dv = ",
         a.nv * int64_t{a.dk} * a.dv, " (got ", a.rec_slot_stride, ")");
  if (!(a.eps >= 0)) fail("deltanet_decode: eps ", a.eps, " must be >= 0");
  launch_chained(deltanet_decode_kernel, dim3(a.nv, a.B), dim3(kThreads), 0, stream, a);
  QWENRT_CUDA_CHECK_LAUNCH();
}

}  // namespace qwenrt::cuda
