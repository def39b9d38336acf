#include "backend/cuda/skinny_gemm.h"

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/mma.cuh"

namespace qwenrt::cuda {
namespace {

constexpr int kWarps = 8;           // warps of a block split K between them
constexpr int kRowsPerBlock = 16;   // one m16 tile of weight rows per block
constexpr int kChunk = 32;          // K elements one warp consumes per step (4 lanes × 8)

struct Segments {
  GemmSegment seg[kSkinnyGemmMaxSegments];
  int first_block[kSkinnyGemmMaxSegments + 1];
  int count;
};

// Block b owns 16 weight rows of one segment; warp w takes K chunks w, w+8, w+16, ... Lane (g, t)
// loads 8 consecutive k of weight rows g and g+8 and of activation rows g + 8j: the dot product is
// order-free in k, so these 16-byte loads feed two m16n8k16 products directly once A and B agree on
// the same permutation of k (no shuffles, no shared memory on the way in).
template <int NT>  // n-tiles of 8 activation rows
__global__ void __launch_bounds__(kWarps * 32) skinny_gemm_kernel(const __nv_bfloat16* __restrict__ x, int n, int64_t k,
                                                                  int64_t ldx, Segments segs) {
  constexpr int U = NT <= 2 ? 4 : 2;  // chunks in flight per warp
  __shared__ float partial[kWarps][NT][4][32];

  int s = 0;
  while (s + 1 < segs.count && static_cast<int>(blockIdx.x) >= segs.first_block[s + 1]) ++s;
  const GemmSegment& seg = segs.seg[s];
  const int64_t row0 = static_cast<int64_t>(blockIdx.x - segs.first_block[s]) * kRowsPerBlock;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int64_t rg = row0 + g, rh = row0 + g + 8;
  const bool has_g = rg < seg.rows, has_h = rh < seg.rows;
  const __nv_bfloat16* wg = seg.w + rg * k + 8 * t;
  const __nv_bfloat16* wh = seg.w + rh * k + 8 * t;

  float acc[NT][4] = {};
  const int64_t chunks = (k + kChunk - 1) / kChunk;
  for (int64_t base = warp; base < chunks; base += kWarps * U) {
    uint4 a_g[U], a_h[U], b[U][NT];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t kk = (base + static_cast<int64_t>(kWarps) * u) * kChunk + 8 * t;
      const bool in_k = kk < k;
      a_g[u] = in_k && has_g ? load_stream16(wg + kk - 8 * t) : make_uint4(0, 0, 0, 0);
      a_h[u] = in_k && has_h ? load_stream16(wh + kk - 8 * t) : make_uint4(0, 0, 0, 0);
#pragma unroll
      for (int j = 0; j < NT; ++j) {
        const int xr = 8 * j + g;
        b[u][j] = in_k && xr < n ? load_shared16(x + xr * ldx + kk) : make_uint4(0, 0, 0, 0);
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int j = 0; j < NT; ++j) {
        mma_bf16_16816(acc[j], a_g[u].x, a_h[u].x, a_g[u].y, a_h[u].y, b[u][j].x, b[u][j].y);
        mma_bf16_16816(acc[j], a_g[u].z, a_h[u].z, a_g[u].w, a_h[u].w, b[u][j].z, b[u][j].w);
      }
  }

#pragma unroll
  for (int j = 0; j < NT; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) partial[warp][j][e][lane] = acc[j][e];
  __syncthreads();
  for (int idx = threadIdx.x; idx < NT * 4 * 32; idx += kWarps * 32) {
    const int j = idx / 128, e = (idx / 32) % 4, l = idx % 32;
    float sum = 0;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) sum += partial[w][j][e][l];
    const int64_t row = row0 + l / 4 + (e >= 2 ? 8 : 0);
    const int col = 8 * j + 2 * (l % 4) + (e & 1);
    if (row < seg.rows && col < n) {
      float* dst = seg.y + col * seg.ldy + row;
      *dst = seg.accumulate ? *dst + sum : sum;
    }
  }
}

template <int NT>
void launch(const __nv_bfloat16* x, int n, int64_t k, int64_t ldx, const Segments& segs, int blocks, cudaStream_t stream) {
  skinny_gemm_kernel<NT><<<blocks, kWarps * 32, 0, stream>>>(x, n, k, ldx, segs);
}

}  // namespace

void skinny_gemm(const __nv_bfloat16* x, int64_t n, int64_t k, int64_t ldx, std::span<const GemmSegment> segments,
                 cudaStream_t stream) {
  if (n < 1 || n > kSkinnyGemmMaxRows) fail("skinny_gemm: ", n, " activation rows; it takes 1 to ", kSkinnyGemmMaxRows);
  if (k < 8 || k % 8 != 0 || ldx < k || ldx % 8 != 0) fail("skinny_gemm: k ", k, " and ldx ", ldx, " must be multiples of 8 with ldx >= k");
  if (segments.empty() || segments.size() > kSkinnyGemmMaxSegments)
    fail("skinny_gemm: ", segments.size(), " weights; it takes 1 to ", kSkinnyGemmMaxSegments);
  if (reinterpret_cast<uintptr_t>(x) % 16 != 0) fail("skinny_gemm: activations are not 16-byte aligned");
  Segments segs{};
  segs.count = static_cast<int>(segments.size());
  int64_t blocks = 0;
  for (int i = 0; i < segs.count; ++i) {
    const GemmSegment& s = segments[i];
    if (s.rows < 1 || s.ldy < s.rows || reinterpret_cast<uintptr_t>(s.w) % 16 != 0)
      fail("skinny_gemm: weight ", i, " has ", s.rows, " rows, ldy ", s.ldy, " (needs rows >= 1, ldy >= rows, 16-byte alignment)");
    segs.seg[i] = s;
    segs.first_block[i] = static_cast<int>(blocks);
    blocks += (s.rows + kRowsPerBlock - 1) / kRowsPerBlock;
  }
  if (blocks > (1ll << 31) - 1) fail("skinny_gemm: too many weight rows");
  segs.first_block[segs.count] = static_cast<int>(blocks);
  const int nt = static_cast<int>((n + 7) / 8), b = static_cast<int>(blocks), rows = static_cast<int>(n);
  switch (nt) {
    case 1: launch<1>(x, rows, k, ldx, segs, b, stream); break;
    case 2: launch<2>(x, rows, k, ldx, segs, b, stream); break;
    case 3: launch<3>(x, rows, k, ldx, segs, b, stream); break;
    case 4: launch<4>(x, rows, k, ldx, segs, b, stream); break;
    case 5: launch<5>(x, rows, k, ldx, segs, b, stream); break;
    case 6: launch<6>(x, rows, k, ldx, segs, b, stream); break;
    case 7: launch<7>(x, rows, k, ldx, segs, b, stream); break;
    default: launch<8>(x, rows, k, ldx, segs, b, stream); break;
  }
  QWENRT_CUDA_CHECK_LAUNCH();
}

}  // namespace qwenrt::cuda
