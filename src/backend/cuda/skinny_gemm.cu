#include "backend/cuda/skinny_gemm.h"

#include "backend/cuda/chained_launch.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/mma.cuh"

namespace qwenrt::cuda {
namespace {

constexpr int kWarps = 8;           // warps of a block split K between them
constexpr int kRowsPerBlock = 16;   // one m16 tile of weight rows per block
constexpr int kChunk = 32;          // K elements one warp consumes per step (4 lanes × 8)

struct Segments {
  GemmSegment seg[kSkinnyGemmMaxSegments];
  int first_block[kSkinnyGemmMaxSegments + 1];  // first row tile of each segment
  int64_t first_row[kSkinnyGemmMaxSegments + 1];  // its first row among all segments' rows
  int count;
  int splits;            // K ranges, one per blockIdx.y; > 1 for weights too small to fill the GPU
  int64_t split_chunks;  // K chunks per range
  float* partial;        // [splits, n, total rows] when splits > 1
};

// Block (b, s) owns 16 weight rows of one segment and K range s; warp w takes the range's K chunks
// w, w+8, w+16, ... Lane (g, t)
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
  const int64_t first_chunk = blockIdx.y * segs.split_chunks;
  const int64_t chunks = min((k + kChunk - 1) / kChunk, first_chunk + segs.split_chunks);
  // The weights do not depend on the kernels before: their first step goes to L2 while those
  // finish (chained launch), then the activations are waited for.
  if (t == 0) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t c = first_chunk + warp + static_cast<int64_t>(kWarps) * u;
      if (c < chunks) {
        if (has_g) prefetch_l2(wg + c * kChunk);
        if (has_h) prefetch_l2(wh + c * kChunk);
      }
    }
  }
  chained_kernel_start();
  for (int64_t base = first_chunk + warp; base < chunks; base += kWarps * U) {
    uint4 a_g[U], a_h[U], b[U][NT];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t c = base + static_cast<int64_t>(kWarps) * u;
      const int64_t kk = c * kChunk + 8 * t;
      const bool in_k = c < chunks && kk < k;
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
    if (row >= seg.rows || col >= n) continue;
    if (segs.splits == 1) {
      float* dst = seg.y + col * seg.ldy + row;
      *dst = seg.accumulate ? *dst + sum : sum;
    } else {
      const int64_t total_rows = segs.first_row[segs.count];
      segs.partial[(static_cast<int64_t>(blockIdx.y) * n + col) * total_rows + segs.first_row[s] + row] = sum;
    }
  }
}

// The K ranges' partial products summed in range order (deterministic), then stored.
__global__ void skinny_gemm_reduce_kernel(int n, Segments segs) {
  chained_kernel_start();
  const int64_t total_rows = segs.first_row[segs.count];
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= total_rows * n) return;
  const int64_t col = i / total_rows, r = i % total_rows;
  float sum = 0;
  for (int sp = 0; sp < segs.splits; ++sp) sum += segs.partial[(static_cast<int64_t>(sp) * n + col) * total_rows + r];
  int s = 0;
  while (s + 1 < segs.count && r >= segs.first_row[s + 1]) ++s;
  const GemmSegment& seg = segs.seg[s];
  float* dst = seg.y + col * seg.ldy + (r - segs.first_row[s]);
  *dst = seg.accumulate ? *dst + sum : sum;
}

template <int NT>
void launch(const __nv_bfloat16* x, int n, int64_t k, int64_t ldx, const Segments& segs, int blocks, cudaStream_t stream) {
  launch_chained(skinny_gemm_kernel<NT>, dim3(blocks, segs.splits), dim3(kWarps * 32), 0, stream, x, n, k, ldx, segs);
}

// Row tiles below which a launch splits K to keep every multiprocessor streaming (a fixed number,
// not read off the device: the split, and so the rounding, is then the same on every GPU). Measured
// on an H200: 320 tiles (27B down_proj) gain 17% from 2 ranges, 64 tiles (0.8B down_proj) 1.8x
// from 8, while 384 tiles (0.8B in_proj) lose 50% to the second pass.
constexpr int64_t kTargetBlocks = 384;
constexpr int64_t kMinChunksPerSplit = 8;  // 256 k: a range short enough to be all latency

// K ranges for a launch of `tiles` row tiles over k: a function of the weights' shapes alone, so
// an output row's rounding does not depend on the batch.
int64_t split_count(int64_t tiles, int64_t k) {
  const int64_t chunks = (k + kChunk - 1) / kChunk;
  int64_t splits = 1;
  while (tiles * splits < kTargetBlocks && chunks / (splits * 2) >= kMinChunksPerSplit) splits *= 2;
  return splits;
}

int64_t total_tiles(std::span<const GemmSegment> segments) {
  int64_t tiles = 0;
  for (const auto& s : segments) tiles += (s.rows + kRowsPerBlock - 1) / kRowsPerBlock;
  return tiles;
}

}  // namespace

std::size_t skinny_gemm_workspace_bytes(int64_t n, int64_t k, std::span<const GemmSegment> segments) {
  const int64_t splits = split_count(total_tiles(segments), k);
  if (splits == 1) return 0;
  int64_t rows = 0;
  for (const auto& s : segments) rows += s.rows;
  return static_cast<std::size_t>(splits * n * rows) * sizeof(float);
}

void skinny_gemm(const __nv_bfloat16* x, int64_t n, int64_t k, int64_t ldx, std::span<const GemmSegment> segments,
                 cudaStream_t stream, void* workspace, std::size_t workspace_bytes) {
  if (n < 1 || n > kSkinnyGemmMaxRows) fail("skinny_gemm: ", n, " activation rows; it takes 1 to ", kSkinnyGemmMaxRows);
  if (k < 8 || k % 8 != 0 || ldx < k || ldx % 8 != 0) fail("skinny_gemm: k ", k, " and ldx ", ldx, " must be multiples of 8 with ldx >= k");
  if (segments.empty() || segments.size() > kSkinnyGemmMaxSegments)
    fail("skinny_gemm: ", segments.size(), " weights; it takes 1 to ", kSkinnyGemmMaxSegments);
  if (reinterpret_cast<uintptr_t>(x) % 16 != 0) fail("skinny_gemm: activations are not 16-byte aligned");
  Segments segs{};
  segs.count = static_cast<int>(segments.size());
  int64_t blocks = 0, rows_total = 0;
  for (int i = 0; i < segs.count; ++i) {
    const GemmSegment& s = segments[i];
    if (s.rows < 1 || s.ldy < s.rows || reinterpret_cast<uintptr_t>(s.w) % 16 != 0)
      fail("skinny_gemm: weight ", i, " has ", s.rows, " rows, ldy ", s.ldy, " (needs rows >= 1, ldy >= rows, 16-byte alignment)");
    segs.seg[i] = s;
    segs.first_block[i] = static_cast<int>(blocks);
    segs.first_row[i] = rows_total;
    blocks += (s.rows + kRowsPerBlock - 1) / kRowsPerBlock;
    rows_total += s.rows;
  }
  segs.first_row[segs.count] = rows_total;
  segs.splits = static_cast<int>(split_count(blocks, k));
  segs.split_chunks = ((k + kChunk - 1) / kChunk + segs.splits - 1) / segs.splits;
  segs.partial = static_cast<float*>(workspace);
  if (segs.splits > 1) {
    const std::size_t need = skinny_gemm_workspace_bytes(n, k, segments);
    if (!workspace || workspace_bytes < need)
      fail("skinny_gemm: needs ", need, " bytes of workspace for ", segs.splits, " K ranges, got ", workspace_bytes);
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
  if (segs.splits > 1) {
    const int64_t outputs = rows_total * n;
    launch_chained(skinny_gemm_reduce_kernel, dim3(static_cast<unsigned>((outputs + 255) / 256)), dim3(256), 0, stream, rows, segs);
    QWENRT_CUDA_CHECK_LAUNCH();
  }
}

}  // namespace qwenrt::cuda
