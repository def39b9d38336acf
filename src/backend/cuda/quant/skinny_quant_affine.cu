// Decode-shaped products over MLX affine weights in rows (skinny_quant_gemm.h): the ones the uploader
// did not tile (columns not a multiple of 64; weights in tiles go to skinny_quant_affine_tiles.cu). One warp per weight row, 16-byte loads (32
// four-bit or 16 eight-bit fields, inside one group), 4 loads in flight per lane, each field dequantized in registers with one rounding (fma(s, q,
// b), as the CPU) and multiplied into four f32 sums per activation row in a fixed order, then a fixed butterfly: a row's result is the same bit for
// bit alone or among 8.
#include <cstdint>

#include "backend/cuda/ptx/mma.cuh"
#include "backend/cuda/quant/piece_dot.cuh"
#include "backend/cuda/quant/skinny_quant_kernels.h"
#include "backend/cuda/runtime/chained_launch.h"
#include "backend/cuda/runtime/cuda_check.h"
#include "core/error.h"

namespace qwenrt::cuda {
namespace {

constexpr int kWarps = 8;  // weight rows per block, one per warp
constexpr int kThreads = kWarps * 32;
constexpr int kLoadsInFlight = 4;  // 16-byte weight loads a lane issues before it multiplies them

struct QuantSegments {
  QuantSegment seg[kSkinnyQuantMaxSegments];
  int64_t first_row[kSkinnyQuantMaxSegments + 1];  // first global row of each segment; [count] = all rows
  int count;
};

// Lane `lane`'s share of row r's dot products with the NR activation rows.
template <QuantKind K, int NR>
__device__ __forceinline__ void row_sums(const QuantMatrix& m, int64_t r, const __nv_bfloat16* x, int64_t ldx, int lane, float (&acc)[NR][4]) {
  constexpr int kPer = quant::kPieceElements<K>;
  const int64_t pieces = m.cols / kPer;
  const auto* row = static_cast<const uint8_t*>(m.data) + r * m.row_bytes();
  for (int64_t i0 = lane; i0 < pieces; i0 += 32 * kLoadsInFlight) {
    uint4 q[kLoadsInFlight];
#pragma unroll
    for (int u = 0; u < kLoadsInFlight; ++u) {
      const int64_t i = i0 + 32 * u;
      q[u] = i < pieces ? load_stream16(row + i * 16) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < kLoadsInFlight; ++u) {
      const int64_t i = i0 + 32 * u;
      if (i < pieces) piece<K, NR>(m, r, i * kPer, q[u], x, ldx, acc);
    }
  }
}

template <int NR>
__global__ void __launch_bounds__(kThreads) skinny_quant_kernel(const __nv_bfloat16* __restrict__ x, int64_t ldx, QuantSegments segs) {
  chained_kernel_start();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t global_row = static_cast<int64_t>(blockIdx.x) * kWarps + warp;
  if (global_row >= segs.first_row[segs.count]) return;
  int s = 0;
  while (s + 1 < segs.count && global_row >= segs.first_row[s + 1]) ++s;
  const QuantSegment& seg = segs.seg[s];
  const int64_t r = global_row - segs.first_row[s];

  float acc[NR][4];
#pragma unroll
  for (int b = 0; b < NR; ++b)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[b][e] = 0.0f;
  switch (seg.w.kind) {
    case QuantKind::Affine4: row_sums<QuantKind::Affine4, NR>(seg.w, r, x, ldx, lane, acc); break;
    case QuantKind::Affine8: row_sums<QuantKind::Affine8, NR>(seg.w, r, x, ldx, lane, acc); break;
    default: break;  // FP8 runs through skinny_quant_fp8.cu
  }
  float v[NR];
#pragma unroll
  for (int b = 0; b < NR; ++b) v[b] = warp_sum(acc[b]);
  if (lane != 0) return;
#pragma unroll
  for (int b = 0; b < NR; ++b) {
    float* y = seg.y + b * seg.ldy + r;
    *y = seg.accumulate ? __fadd_rn(*y, v[b]) : v[b];
  }
}

template <int NR>
void launch(const __nv_bfloat16* x, int64_t ldx, const QuantSegments& segs, cudaStream_t stream) {
  const int64_t blocks = (segs.first_row[segs.count] + kWarps - 1) / kWarps;
  const auto kernel = skinny_quant_kernel<NR>;
  const dim3 grid(static_cast<unsigned>(blocks));
  launch_chained(kernel, grid, dim3(kThreads), 0, stream, x, ldx, segs);
}

}  // namespace

void skinny_quant_affine(const __nv_bfloat16* x, int64_t n, int64_t ldx, std::span<const QuantSegment> segments, cudaStream_t stream) {
  if (n < 1 || n > kSkinnyQuantRowsKernelRows) fail("internal: ", n, " rows in one launch over weights in rows");
  QuantSegments segs{};
  int64_t rows = 0;
  for (const QuantSegment& s : segments) {
    segs.seg[segs.count] = s;
    segs.first_row[segs.count] = rows;
    rows += s.w.rows;
    ++segs.count;
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
