// argmax_rows: each row's first largest column (NaN as −∞), by one block per row or, with a
// workspace, many blocks per row and a pick of their candidates, and each row's health (argmax_rows.h).
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "backend/cuda/ptx/mma.cuh"
#include "backend/cuda/rows/argmax_rows.h"
#include "backend/cuda/rows/row_launch.h"
#include "backend/cuda/runtime/chained_launch.h"
#include "backend/cuda/runtime/cuda_check.h"

namespace qwenrt::cuda {
namespace {
using namespace row_launch;

// The better of two (value, column) candidates: the larger value, the first column among equals.
__device__ __forceinline__ void keep_better(float& v, int32_t& i, float v2, int32_t i2) {
  if (v2 > v || (v2 == v && i2 < i)) {
    v = v2;
    i = i2;
  }
}

// Block (part, row) scans columns [part·span, (part+1)·span) of its row, each thread a strided
// share (its first maximum), and reduces the candidates, ties to the lower column. One part per
// row writes the answer; several write candidates for argmax_pick_kernel.
constexpr int kArgmaxParts = 64;          // blocks per row for wide rows
constexpr int64_t kArgmaxMinSpan = 4096;  // columns per part at least

__device__ __forceinline__ void block_argmax(float& v, int32_t& i) {
  __shared__ float best_v[kRowThreads / 32];
  __shared__ int32_t best_i[kRowThreads / 32];
  for (int o = 16; o > 0; o /= 2) keep_better(v, i, __shfl_xor_sync(0xffffffffu, v, o), __shfl_xor_sync(0xffffffffu, i, o));
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) {
    best_v[warp] = v;
    best_i[warp] = i;
  }
  __syncthreads();
  v = best_v[lane % (kRowThreads / 32)];
  i = best_i[lane % (kRowThreads / 32)];
  for (int o = 16; o > 0; o /= 2) keep_better(v, i, __shfl_xor_sync(0xffffffffu, v, o), __shfl_xor_sync(0xffffffffu, i, o));
}

// A row's health for ArgmaxHealth: the step's word, or the head's site if the row is not finite.
__device__ __forceinline__ void write_health(const ArgmaxHealth& h, int64_t row, bool bad) {
  if (!h.mirror) return;
  const unsigned long long head = (static_cast<unsigned long long>(h.head_site) << 32) | static_cast<uint32_t>(row);
  const unsigned long long before = h.step_word ? *h.step_word : kStepHealthy;
  h.mirror[row] = bad && head < before ? head : before;
}

__global__ void argmax_kernel(const float* x, int64_t ldx, int64_t width, int64_t span, int32_t* out, int32_t* mirror, float2* candidates,
                              ArgmaxHealth health) {
  chained_kernel_start();
  const int64_t row = blockIdx.y, c0 = blockIdx.x * span, c1 = min(width, c0 + span);
  const float* xr = x + row * ldx;
  float v = -INFINITY;
  int32_t i = INT32_MAX;
  bool bad = false;
#pragma unroll 4  // several loads in flight (same comparisons, same order)
  for (int64_t c = c0 + threadIdx.x; c < c1; c += kRowThreads) {
    const float xc = xr[c];
    bad |= !isfinite(xc);
    if (xc > v || i == INT32_MAX) {  // NaN is never larger; a thread's first column seeds it
      v = xc != xc ? -INFINITY : xc;
      i = static_cast<int32_t>(c);
    }
  }
  bad = __syncthreads_or(bad);
  block_argmax(v, i);
  if (threadIdx.x != 0) return;
  if (gridDim.x == 1) {
    out[row] = i;
    if (mirror) mirror[row] = i;
    write_health(health, row, bad);
  } else {
    // A part that saw a non-finite value marks its candidate with the column's sign bit (columns
    // are below 2^31), keeping its value: an all −∞ or all-NaN row still picks column 0.
    candidates[row * gridDim.x + blockIdx.x] = make_float2(v, __int_as_float(bad ? static_cast<int32_t>(static_cast<uint32_t>(i) | 0x80000000u) : i));
  }
}

// One warp per row: the best of the row's part candidates (parts of an empty range hold INT32_MAX,
// never better than a real column; a set sign bit marks a part that saw a non-finite value).
__global__ void argmax_pick_kernel(const float2* candidates, int parts, int32_t* out, int32_t* mirror, ArgmaxHealth health) {
  chained_kernel_start();
  const int lane = threadIdx.x;
  float v = -INFINITY;
  int32_t i = INT32_MAX;
  bool bad = false;
  for (int p = lane; p < parts; p += 32) {
    const float2 c = candidates[static_cast<int64_t>(blockIdx.x) * parts + p];
    const int32_t column = __float_as_int(c.y);
    bad |= column < 0;
    keep_better(v, i, c.x, column & 0x7fffffff);
  }
  for (int o = 16; o > 0; o /= 2) keep_better(v, i, __shfl_xor_sync(0xffffffffu, v, o), __shfl_xor_sync(0xffffffffu, i, o));
  bad = __any_sync(0xffffffffu, bad);
  if (lane != 0) return;
  out[blockIdx.x] = i;
  if (mirror) mirror[blockIdx.x] = i;
  write_health(health, blockIdx.x, bad);
}

int argmax_parts(int64_t width) { return static_cast<int>(std::clamp<int64_t>(width / kArgmaxMinSpan, 1, kArgmaxParts)); }

}  // namespace

std::size_t argmax_workspace_bytes(int64_t rows, int64_t width) {
  const int parts = argmax_parts(width);
  return parts == 1 ? 0 : static_cast<std::size_t>(rows) * parts * sizeof(float2);
}

void argmax_rows(const float* x, int64_t ldx, int64_t rows, int64_t width, int32_t* out, cudaStream_t stream, void* workspace,
                 std::size_t workspace_bytes, int32_t* mirror, const ArgmaxHealth& health) {
  check_rows(rows, "argmax_rows");
  if (width < 1 || width > (1ll << 31) - 1 || ldx < width) fail("argmax_rows: width ", width, " must be 1 to 2^31-1 and at most ldx ", ldx);
  if (rows > kMaxGridY) fail("argmax_rows: ", rows, " rows; it takes up to ", kMaxGridY);
  if (reinterpret_cast<uintptr_t>(workspace) % alignof(float2) != 0) fail("argmax_rows: the workspace is not 8-byte aligned");
  if (rows == 0) return;
  // Without (enough) workspace: one block per row.
  const int parts = workspace && workspace_bytes >= argmax_workspace_bytes(rows, width) ? argmax_parts(width) : 1;
  const int64_t span = (width + parts - 1) / parts;
  auto* candidates = static_cast<float2*>(workspace);
  launch_chained(argmax_kernel, dim3(static_cast<unsigned>(parts), static_cast<unsigned>(rows)), dim3(kRowThreads), 0, stream, x, ldx, width, span,
                 out, mirror, candidates, health);
  QWENRT_CUDA_CHECK_LAUNCH();
  if (parts == 1) return;
  launch_chained(argmax_pick_kernel, dim3(static_cast<unsigned>(rows)), dim3(32), 0, stream, static_cast<const float2*>(candidates), parts, out,
                 mirror, health);
  QWENRT_CUDA_CHECK_LAUNCH();
}

}  // namespace qwenrt::cuda
