// Decode-shaped products over MLX affine weights (skinny_quant_gemm.h): a warp per pair of weight
// rows (one row for 3 to 8 activation rows, where the registers run short), 16-byte loads (32
// four-bit or 16 eight-bit fields, inside one group), 4 loads per row in flight per lane with their
// scales and biases, each activation load serving both rows; each field dequantized in registers
// with one rounding (fma(s, q, b), as the CPU; q made f32 without an integer conversion) and
// multiplied into four f32 sums per activation row in a fixed order, then a fixed butterfly: a row's
// result is the same bit for bit alone or among 8, and whichever row it is paired with. (A
// tensor-core form, exact per-group sums, measured slower on the H100 for these formats:
// bench/results/2026-12-06-0005-h100-quant.md.)
#include <cstdint>

#include "backend/cuda/ptx/mma.cuh"
#include "backend/cuda/quant/piece_dot.cuh"
#include "backend/cuda/quant/skinny_quant_kernels.h"
#include "backend/cuda/runtime/chained_launch.h"
#include "backend/cuda/runtime/cuda_check.h"
#include "core/error.h"

namespace qwenrt::cuda {
namespace {

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr int kLoadsInFlight = 4;  // 16-byte weight loads per row a lane issues before it multiplies them

// Weight rows per warp for NR activation rows.
template <int NR>
constexpr int kRowsPerWarp = NR <= 2 ? 2 : 1;

struct QuantSegments {
  QuantSegment seg[kSkinnyQuantMaxSegments];
  int64_t first_row[kSkinnyQuantMaxSegments + 1];  // first global row of each segment; [count] = all rows
  int count;
};

// Lane `lane`'s share of the dot products of rows r0 .. r0 + R of m with the NR activation rows.
template <QuantKind K, int NR, int R>
__device__ __forceinline__ void row_sums(const QuantMatrix& m, int64_t r0, const __nv_bfloat16* x, int64_t ldx, int lane, float (&acc)[R][NR][4]) {
  constexpr int kPer = quant::kPieceElements<K>;
  const int64_t per_row = m.cols / kPer;  // pieces of a row
  const auto* row = static_cast<const uint8_t*>(m.data) + r0 * m.row_bytes();
  for (int64_t i0 = lane; i0 < per_row; i0 += 32 * kLoadsInFlight) {
    uint4 q[kLoadsInFlight][R];
    float scale[kLoadsInFlight][R], bias[kLoadsInFlight][R];
#pragma unroll
    for (int u = 0; u < kLoadsInFlight; ++u) {
      const int64_t i = i0 + 32 * u;
#pragma unroll
      for (int r = 0; r < R; ++r) q[u][r] = i < per_row ? load_stream16(row + r * m.row_bytes() + i * 16) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < kLoadsInFlight; ++u) {
      const int64_t i = i0 + 32 * u;
#pragma unroll
      for (int r = 0; r < R; ++r) {
        scale[u][r] = bias[u][r] = 0.0f;
        if (i < per_row) quant::piece_scale_bias<K>(m, r0 + r, i * kPer, scale[u][r], bias[u][r]);
      }
    }
#pragma unroll
    for (int u = 0; u < kLoadsInFlight; ++u) {
      const int64_t i = i0 + 32 * u;
      if (i < per_row) pieces<K, NR, R>(q[u], scale[u], bias[u], x, ldx, i * kPer, acc);
    }
  }
}

// Rows r0 .. r0 + R of one segment's weight into its output.
template <int NR, int R>
__device__ __forceinline__ void rows_into(const QuantSegment& seg, int64_t r0, const __nv_bfloat16* x, int64_t ldx, int lane) {
  float acc[R][NR][4];
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int b = 0; b < NR; ++b)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[r][b][e] = 0.0f;
  switch (seg.w.kind) {
    case QuantKind::Affine4: row_sums<QuantKind::Affine4, NR, R>(seg.w, r0, x, ldx, lane, acc); break;
    case QuantKind::Affine8: row_sums<QuantKind::Affine8, NR, R>(seg.w, r0, x, ldx, lane, acc); break;
    default: break;  // FP8 runs through skinny_quant_fp8.cu
  }
#pragma unroll
  for (int r = 0; r < R; ++r) {
    float v[NR];
#pragma unroll
    for (int b = 0; b < NR; ++b) v[b] = warp_sum(acc[r][b]);
    if (lane == 0) {
#pragma unroll
      for (int b = 0; b < NR; ++b) {
        float* y = seg.y + b * seg.ldy + r0 + r;
        *y = seg.accumulate ? __fadd_rn(*y, v[b]) : v[b];
      }
    }
  }
}

template <int NR>
__global__ void __launch_bounds__(kThreads) skinny_quant_kernel(const __nv_bfloat16* __restrict__ x, int64_t ldx, QuantSegments segs) {
  constexpr int R = kRowsPerWarp<NR>;
  chained_kernel_start();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t first = (static_cast<int64_t>(blockIdx.x) * kWarps + warp) * R, total = segs.first_row[segs.count];
  if (first >= total) return;
  int s = 0;
  while (s + 1 < segs.count && first >= segs.first_row[s + 1]) ++s;
  // The warp's rows together where one weight holds them all; else one at a time (the same sums).
  if (first + R <= segs.first_row[s + 1]) return rows_into<NR, R>(segs.seg[s], first - segs.first_row[s], x, ldx, lane);
  for (int64_t g = first; g < first + R && g < total; ++g) {
    while (g >= segs.first_row[s + 1]) ++s;
    rows_into<NR, 1>(segs.seg[s], g - segs.first_row[s], x, ldx, lane);
  }
}

template <int NR>
void launch(const __nv_bfloat16* x, int64_t ldx, const QuantSegments& segs, cudaStream_t stream) {
  constexpr int64_t rows_per_block = kWarps * kRowsPerWarp<NR>;
  const int64_t blocks = (segs.first_row[segs.count] + rows_per_block - 1) / rows_per_block;
  const auto kernel = skinny_quant_kernel<NR>;
  const dim3 grid(static_cast<unsigned>(blocks));
  launch_chained(kernel, grid, dim3(kThreads), 0, stream, x, ldx, segs);
}

}  // namespace

void skinny_quant_affine(const __nv_bfloat16* x, int64_t n, int64_t ldx, std::span<const QuantSegment> segments, cudaStream_t stream) {
  QuantSegments segs{};
  segs.count = static_cast<int>(segments.size());
  int64_t rows = 0;
  for (int i = 0; i < segs.count; ++i) {
    segs.seg[i] = segments[i];
    segs.first_row[i] = rows;
    rows += segments[i].w.rows;
  }
  segs.first_row[segs.count] = rows;
  if ((rows + kWarps - 1) / kWarps > (1ll << 31) - 1) fail("skinny_quant_gemm: too many weight rows");
  switch (n) {
    case 1: launch<1>(x, ldx, segs, stream); break;
    case 2: launch<2>(x, ldx, segs, stream); break;
    case 3: launch<3>(x, ldx, segs, stream); break;
    case 4: launch<4>(x, ldx, segs, stream); break;
    case 5: launch<5>(x, ldx, segs, stream); break;
    case 6: launch<6>(x, ldx, segs, stream); break;
    case 7: launch<7>(x, ldx, segs, stream); break;
    default: launch<8>(x, ldx, segs, stream); break;
  }
  QWENRT_CUDA_CHECK_LAUNCH();
}

}  // namespace qwenrt::cuda
