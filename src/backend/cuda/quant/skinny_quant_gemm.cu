// Decode-shaped products over quantized weights on the tensor cores (skinny_quant_gemm.h).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <vector>

#include "backend/cuda/ptx/mma.cuh"
#include "backend/cuda/quant/quant_decode.cuh"
#include "backend/cuda/quant/skinny_quant_gemm.h"
#include "backend/cuda/runtime/chained_launch.h"
#include "backend/cuda/runtime/cuda_check.h"
#include "core/error.h"

namespace qwenrt::cuda {
namespace {

constexpr int kWarps = 8;  // warps of a block split K between them
constexpr int kThreads = kWarps * 32;
constexpr int kTileRows = 16;  // weight rows per block: one m16 tile
constexpr int kRedBytes = kWarps * 4 * 32 * sizeof(float);

struct QuantSegments {
  QuantSegment seg[kSkinnyQuantMaxSegments];
  int first_tile[kSkinnyQuantMaxSegments + 1];  // first row tile of each segment; [count] = all tiles
  int count;
};

// How a lane reads and decodes its piece of a weight row. Lane (g, t) of a warp reads `PB` bytes
// of rows g and g + 8 of the tile; the four lanes t = 0..3 read neighbouring pieces, a "chunk" of
// kChunk columns that lies inside one affine group (or FP8 tile column), so one scale and bias
// finish the chunk's sums: PB is chosen per weight from its group size (piece_bytes()).
template <QuantKind K, int PB>
struct Layout {
  static constexpr int kWords = PB / 4;                            // 32-bit words of a piece
  static constexpr int kElems = K == QuantKind::Affine4 ? 2 * PB : PB;  // columns of a piece
  static constexpr int kSteps = kElems / 4;                        // m16n8k16 products per piece
  static constexpr int kChunk = 4 * kElems;                        // columns of the four lanes' pieces
  static constexpr int kXWords = kElems / 2;                       // bf16 pairs of activations per piece
  static constexpr int kGroup = PB == 16 ? 2 : 4;                  // pieces a lane keeps in flight
};

// PB bytes that are read once (load_stream16's policy: not kept in L1, evicted first from L2).
template <int PB>
__device__ __forceinline__ void load_piece(const uint8_t* p, uint32_t (&w)[PB / 4]) {
  if constexpr (PB == 16) {
    const uint4 v = load_stream16(p);
    w[0] = v.x, w[1] = v.y, w[2] = v.z, w[3] = v.w;
  } else if constexpr (PB == 8) {
    const uint2 v = load_stream8(p);
    w[0] = v.x, w[1] = v.y;
  } else {
    w[0] = load_stream4(p);
  }
}

// The fields of a piece as bf16 pairs that the tensor cores multiply exactly, and the offset every
// value carries (the sums are fixed in the fold: value = field + offset):
//   Affine4: the nibbles j and j + 4 of a word as 128 + q (bf16 0x4300 | q: exponent 2^7, q in the
//     low mantissa bits).
//   Affine8: a byte's low nibble as 128 + lo and its high nibble as 2048 + 16·hi (0x4500 | hi), two
//     products into the same sums: 2176 + q.
//   Fp8: the e4m3 byte's magnitude bits moved under bf16's sign, exponent and mantissa (which makes
//     it 2^-120 times the value, subnormals included), times 2^120: the value itself, exact.
// Step s of a piece takes pairs (a_lo, a_hi) of rows g and g + 8 that feed the fragment's columns
// 2t..2t+1 and 2t+8..2t+9; the activations' pairs are taken in the same order (b_pairs()), so the
// product sums the right columns (the dot product is order-free in k).
template <QuantKind K, int PB>
__device__ __forceinline__ void step_pairs(const uint32_t (&w)[PB / 4], int s, int pass, uint32_t& lo, uint32_t& hi) {
  if constexpr (K == QuantKind::Affine4) {
    // Word s/2; step parity h takes nibble pairs (2h, 2h + 4) and (2h + 1, 2h + 5).
    const uint32_t v = w[s / 2] >> (8 * (s % 2));
    lo = quant::nibble_pair_128(v);
    hi = quant::nibble_pair_128(v >> 4);
  } else if constexpr (K == QuantKind::Affine8) {
    // Word s: bytes (0, 2) and (1, 3); pass 0 the low nibbles, pass 1 the high ones.
    lo = pass == 0 ? quant::nibble_pair_128(w[s]) : quant::nibble_pair_2048(w[s] >> 4);
    hi = pass == 0 ? quant::nibble_pair_128(w[s] >> 8) : quant::nibble_pair_2048(w[s] >> 12);
  } else {
    // Word s: bytes (0, 2) and (1, 3), times 2^120.
    const uint32_t m02 = quant::fp8_pair_02(w[s]), m13 = quant::fp8_pair_13(w[s]);
    const __nv_bfloat162 two120 = __halves2bfloat162(__ushort_as_bfloat16(quant::kBf16Two120), __ushort_as_bfloat16(quant::kBf16Two120));
    const __nv_bfloat162 a = __hmul2(*reinterpret_cast<const __nv_bfloat162*>(&m02), two120);
    const __nv_bfloat162 b = __hmul2(*reinterpret_cast<const __nv_bfloat162*>(&m13), two120);
    lo = *reinterpret_cast<const uint32_t*>(&a);
    hi = *reinterpret_cast<const uint32_t*>(&b);
  }
}

// The activation pairs that meet step s's weight pairs: x holds the piece's activations as bf16
// pairs (x[m] = columns 2m, 2m + 1 of the piece).
template <QuantKind K, int PB>
__device__ __forceinline__ void b_pairs(const uint32_t* x, int s, uint32_t& b0, uint32_t& b1) {
  if constexpr (K == QuantKind::Affine4) {
    // Word s/2 covers columns 8(s/2) .. +8: pairs (j, j + 4) for j = 2(s%2), 2(s%2) + 1.
    const uint32_t p = x[4 * (s / 2) + (s % 2)], q = x[4 * (s / 2) + (s % 2) + 2];
    b0 = __byte_perm(p, q, 0x5410);
    b1 = __byte_perm(p, q, 0x7632);
  } else {
    // Word s covers columns 4s .. 4s + 4: pairs (0, 2) and (1, 3).
    b0 = __byte_perm(x[2 * s], x[2 * s + 1], 0x5410);
    b1 = __byte_perm(x[2 * s], x[2 * s + 1], 0x7632);
  }
}

template <QuantKind K>
inline constexpr float kOffset = K == QuantKind::Affine4 ? 128.0f : K == QuantKind::Affine8 ? 2176.0f : 0.0f;

__device__ __forceinline__ float scale_at(const void* table, QuantScale type, int64_t i) {
  switch (type) {
    case QuantScale::F32: return __ldg(static_cast<const float*>(table) + i);
    case QuantScale::F16: return __half2float(__ldg(static_cast<const __half*>(table) + i));
    default: return __bfloat162float(__ldg(static_cast<const __nv_bfloat16*>(table) + i));
  }
}

// Block = one 16-row tile of one segment; warp w takes chunks w, w + 8, ... of the row. Per piece,
// lane (g, t) multiplies its fields against activation row g (batch column g of B; zero past n)
// into f32 sums c (rows g, g + 8 × batch columns 2t, 2t + 1) and, affine only, the same
// activations against ones into xs (their sum per batch column); then folds the chunk with its
// scale s and bias b: y += s · c + (b - offset · s) · xs (Σ (q + offset)·x = c). FP8: y += s · c.
// A batch column's sums never see another column's activations and every sum is taken in a fixed
// order (steps, chunks, then the warps in order): a row's result is the same bits alone or among 8.
template <QuantKind K, int PB>
__global__ void __launch_bounds__(kThreads, 2) skinny_quant_kernel(const __nv_bfloat16* __restrict__ x, int n, int64_t ldx, QuantSegments segs) {
  using L = Layout<K, PB>;
  extern __shared__ float4 smem_raw[];
  float* red = reinterpret_cast<float*>(smem_raw);  // the warps' sums: [warp][e][lane] (kRedBytes)
  const int tile = blockIdx.x;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  int si = 0;
  while (si + 1 < segs.count && tile >= segs.first_tile[si + 1]) ++si;
  const QuantSegment& seg = segs.seg[si];
  const QuantMatrix& m = seg.w;
  const int64_t row0 = static_cast<int64_t>(tile - segs.first_tile[si]) * kTileRows;
  // Rows past the weight read row 0 instead: each feeds only its own output row, never stored.
  const int64_t rg = row0 + g < m.rows ? row0 + g : 0, rh = row0 + g + 8 < m.rows ? row0 + g + 8 : 0;
  const int64_t k = m.cols, row_bytes = m.row_bytes();
  const uint8_t* wg = static_cast<const uint8_t*>(m.data) + rg * row_bytes;
  const uint8_t* wh = static_cast<const uint8_t*>(m.data) + rh * row_bytes;
  constexpr int kElemBytesNum = K == QuantKind::Affine4 ? 1 : 2, kElemBytesDen = 2;  // bytes per column: 1/2 or 1
  const int chunks = static_cast<int>((k + L::kChunk - 1) / L::kChunk);
  const int warp_steps = (chunks + kWarps - 1) / kWarps;  // the same for every warp (extra steps multiply zeros)
  const int64_t groups_per_row = K == QuantKind::Fp8 ? 0 : k / m.group_size;

  uint32_t next_g[L::kGroup][L::kWords], next_h[L::kGroup][L::kWords];
  float next_sg[L::kGroup], next_sh[L::kGroup], next_bg[L::kGroup], next_bh[L::kGroup];
  // Column of this lane's piece at its i-th step, or -1 past the row.
  auto piece_col = [&](int i) -> int64_t {
    const int64_t c0 = static_cast<int64_t>(warp + i * kWarps) * L::kChunk + t * L::kElems;
    return c0 < k ? c0 : -1;
  };
  auto load_group = [&](int i0) {
#pragma unroll
    for (int u = 0; u < L::kGroup; ++u) {
      const int64_t c0 = i0 + u < warp_steps ? piece_col(i0 + u) : -1;
      if (c0 >= 0) {
        const int64_t off = c0 * kElemBytesNum / kElemBytesDen;
        load_piece<PB>(wg + off, next_g[u]);
        load_piece<PB>(wh + off, next_h[u]);
        const int64_t chunk_col = c0 - t * L::kElems;
        if constexpr (K == QuantKind::Fp8) {
          const int64_t tc = chunk_col / m.block_cols;
          next_sg[u] = __ldg(static_cast<const float*>(m.scales) + (m.row_offset + rg) / m.block_rows * m.scale_cols + tc);
          next_sh[u] = __ldg(static_cast<const float*>(m.scales) + (m.row_offset + rh) / m.block_rows * m.scale_cols + tc);
          next_bg[u] = next_bh[u] = 0.0f;
        } else {
          const int64_t grp = chunk_col / m.group_size;
          next_sg[u] = scale_at(m.scales, m.scale_type, rg * groups_per_row + grp);
          next_sh[u] = scale_at(m.scales, m.scale_type, rh * groups_per_row + grp);
          next_bg[u] = scale_at(m.biases, m.scale_type, rg * groups_per_row + grp);
          next_bh[u] = scale_at(m.biases, m.scale_type, rh * groups_per_row + grp);
        }
      } else {
#pragma unroll
        for (int j = 0; j < L::kWords; ++j) next_g[u][j] = next_h[u][j] = 0;
        next_sg[u] = next_sh[u] = next_bg[u] = next_bh[u] = 0.0f;
      }
    }
  };
  load_group(0);  // weights never change: in flight before the wait on the kernel ahead
  chained_kernel_start();

  const __nv_bfloat16* xrow = x + g * ldx;
  const bool has_row = g < n;
  float y[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  constexpr uint32_t kOnes = 0x3F803F80u;  // bf16 (1, 1)
  for (int i0 = 0; i0 < warp_steps; i0 += L::kGroup) {
    uint32_t cur_g[L::kGroup][L::kWords], cur_h[L::kGroup][L::kWords];
    float sg[L::kGroup], sh[L::kGroup], bg[L::kGroup], bh[L::kGroup];
#pragma unroll
    for (int u = 0; u < L::kGroup; ++u) {
#pragma unroll
      for (int j = 0; j < L::kWords; ++j) cur_g[u][j] = next_g[u][j], cur_h[u][j] = next_h[u][j];
      sg[u] = next_sg[u], sh[u] = next_sh[u], bg[u] = next_bg[u], bh[u] = next_bh[u];
    }
    if (i0 + L::kGroup < warp_steps) load_group(i0 + L::kGroup);  // in flight while these are multiplied
#pragma unroll
    for (int u = 0; u < L::kGroup; ++u) {
      const int64_t c0 = i0 + u < warp_steps ? piece_col(i0 + u) : -1;
      // The piece's activations (row g; zeros past n or past the row).
      uint32_t xv[L::kXWords];
      if (has_row && c0 >= 0) {
        const __nv_bfloat16* xp = xrow + c0;
        if constexpr (L::kXWords >= 4) {
#pragma unroll
          for (int j = 0; j < L::kXWords / 4; ++j) {
            const uint4 v = __ldg(reinterpret_cast<const uint4*>(xp) + j);
            xv[4 * j] = v.x, xv[4 * j + 1] = v.y, xv[4 * j + 2] = v.z, xv[4 * j + 3] = v.w;
          }
        } else {
          const uint2 v = __ldg(reinterpret_cast<const uint2*>(xp));
          xv[0] = v.x, xv[1] = v.y;
        }
      } else {
#pragma unroll
        for (int j = 0; j < L::kXWords; ++j) xv[j] = 0;
      }
      float c[4] = {0.0f, 0.0f, 0.0f, 0.0f}, xs[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
      for (int s = 0; s < L::kSteps; ++s) {
        uint32_t b0, b1;
        b_pairs<K, PB>(xv, s, b0, b1);
#pragma unroll
        for (int pass = 0; pass < (K == QuantKind::Affine8 ? 2 : 1); ++pass) {
          uint32_t g_lo, g_hi, h_lo, h_hi;
          step_pairs<K, PB>(cur_g[u], s, pass, g_lo, g_hi);
          step_pairs<K, PB>(cur_h[u], s, pass, h_lo, h_hi);
          mma_bf16_16816(c, g_lo, h_lo, g_hi, h_hi, b0, b1);
        }
        if constexpr (K != QuantKind::Fp8) mma_bf16_16816(xs, kOnes, kOnes, kOnes, kOnes, b0, b1);
      }
      if constexpr (K == QuantKind::Fp8) {
        y[0] = __fmaf_rn(sg[u], c[0], y[0]);
        y[1] = __fmaf_rn(sg[u], c[1], y[1]);
        y[2] = __fmaf_rn(sh[u], c[2], y[2]);
        y[3] = __fmaf_rn(sh[u], c[3], y[3]);
      } else {
        const float bg_off = __fmaf_rn(-kOffset<K>, sg[u], bg[u]), bh_off = __fmaf_rn(-kOffset<K>, sh[u], bh[u]);
        y[0] += __fmaf_rn(sg[u], c[0], __fmul_rn(bg_off, xs[0]));
        y[1] += __fmaf_rn(sg[u], c[1], __fmul_rn(bg_off, xs[1]));
        y[2] += __fmaf_rn(sh[u], c[2], __fmul_rn(bh_off, xs[2]));
        y[3] += __fmaf_rn(sh[u], c[3], __fmul_rn(bh_off, xs[3]));
      }
    }
  }

#pragma unroll
  for (int e = 0; e < 4; ++e) red[(warp * 4 + e) * 32 + lane] = y[e];
  __syncthreads();
  // Thread (e, l) finishes lane l's output e: the warps' sums in warp order.
  if (threadIdx.x >= 4 * 32) return;
  const int e = threadIdx.x / 32, l = threadIdx.x % 32;
  float v = 0.0f;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) v += red[(w * 4 + e) * 32 + l];
  const int64_t row = row0 + l / 4 + (e >= 2 ? 8 : 0);
  const int col = 2 * (l % 4) + (e & 1);
  if (col >= n || row >= m.rows) return;
  float* out = seg.y + col * seg.ldy + row;
  *out = seg.accumulate ? __fadd_rn(*out, v) : v;
}

// Bytes a lane reads of a row at a time: the four lanes' pieces must stay inside one affine group
// (FP8 tile column), at most 16.
int piece_bytes(const QuantMatrix& m) {
  const int64_t span = m.kind == QuantKind::Fp8 ? m.block_cols : m.group_size;  // columns sharing a scale
  const int64_t per_byte = m.kind == QuantKind::Affine4 ? 2 : 1;                  // columns per byte
  for (int pb : {16, 8, 4})
    if (span % (4 * pb * per_byte) == 0) return pb;
  fail("skinny_quant_gemm: no piece size fits groups of ", span, " columns");
}

template <QuantKind K, int PB>
void launch(const __nv_bfloat16* x, int n, int64_t ldx, const QuantSegments& segs, cudaStream_t stream) {
  const auto kernel = skinny_quant_kernel<K, PB>;
  const dim3 grid(static_cast<unsigned>(segs.first_tile[segs.count]));
  launch_chained(kernel, grid, dim3(kThreads), kRedBytes, stream, x, n, ldx, segs);
}

void launch_variant(QuantKind kind, int pb, const __nv_bfloat16* x, int n, int64_t ldx, const QuantSegments& segs, cudaStream_t stream) {
  switch (kind) {
    case QuantKind::Affine4:
      if (pb == 16) return launch<QuantKind::Affine4, 16>(x, n, ldx, segs, stream);
      if (pb == 8) return launch<QuantKind::Affine4, 8>(x, n, ldx, segs, stream);
      return launch<QuantKind::Affine4, 4>(x, n, ldx, segs, stream);
    case QuantKind::Affine8:
      if (pb == 16) return launch<QuantKind::Affine8, 16>(x, n, ldx, segs, stream);
      return launch<QuantKind::Affine8, 8>(x, n, ldx, segs, stream);
    case QuantKind::Fp8:
      if (pb == 16) return launch<QuantKind::Fp8, 16>(x, n, ldx, segs, stream);
      if (pb == 8) return launch<QuantKind::Fp8, 8>(x, n, ldx, segs, stream);
      return launch<QuantKind::Fp8, 4>(x, n, ldx, segs, stream);
  }
}

}  // namespace

void skinny_quant_gemm(const __nv_bfloat16* x, int64_t n, int64_t k, int64_t ldx, std::span<const QuantSegment> segments, cudaStream_t stream) {
  if (n < 1 || n > kSkinnyQuantMaxRows) fail("skinny_quant_gemm: ", n, " activation rows; it takes 1 to ", kSkinnyQuantMaxRows);
  if (k < 8 || k % 8 != 0 || ldx < k || ldx % 8 != 0) fail("skinny_quant_gemm: k ", k, " and ldx ", ldx, " must be multiples of 8 with ldx >= k");
  if (reinterpret_cast<uintptr_t>(x) % 16 != 0) fail("skinny_quant_gemm: activations are not 16-byte aligned");
  if (segments.empty() || segments.size() > kSkinnyQuantMaxSegments)
    fail("skinny_quant_gemm: ", segments.size(), " weights; it takes 1 to ", kSkinnyQuantMaxSegments);
  for (std::size_t i = 0; i < segments.size(); ++i) {
    const QuantSegment& s = segments[i];
    check_quant_matrix(s.w, "skinny_quant_gemm");
    if (s.w.cols != k) fail("skinny_quant_gemm: weight ", i, " has ", s.w.cols, " columns for k ", k);
    if (!s.y || s.ldy < s.w.rows) fail("skinny_quant_gemm: weight ", i, " needs an output with ldy >= ", s.w.rows);
  }
  // One launch per run of neighbouring weights that read alike (the kernel is compiled per format
  // and piece size); a checkpoint's q/k/v or gate/up share theirs, so this is one launch.
  for (std::size_t i = 0; i < segments.size();) {
    const QuantKind kind = segments[i].w.kind;
    const int pb = piece_bytes(segments[i].w);
    QuantSegments segs{};
    int64_t tiles = 0;
    for (; i < segments.size() && segments[i].w.kind == kind && piece_bytes(segments[i].w) == pb; ++i) {
      segs.seg[segs.count] = segments[i];
      segs.first_tile[segs.count] = static_cast<int>(tiles);
      tiles += (segments[i].w.rows + kTileRows - 1) / kTileRows;
      ++segs.count;
    }
    if (tiles > (1ll << 31) - 1) fail("skinny_quant_gemm: too many weight rows");
    segs.first_tile[segs.count] = static_cast<int>(tiles);
    launch_variant(kind, pb, x, static_cast<int>(n), ldx, segs, stream);
    QWENRT_CUDA_CHECK_LAUNCH();
  }
}

}  // namespace qwenrt::cuda
