#include "backend/cuda/row_ops.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "backend/cuda/chained_launch.h"
#include "backend/cuda/gate_math.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/mma.cuh"
#include "backend/cuda/row_norm.cuh"

namespace qwenrt::cuda {
namespace {

constexpr int kThreads = 256;
// A decode step has one row: a row's whole width must spread over many threads (norms) or many
// blocks (SwiGLU), or a single multiprocessor works through it alone (measured on an H200: 55 us
// for one 27B SwiGLU row on one 256-thread block, 11 us for one RMSNorm row).
constexpr int kRowThreads = 1024;
constexpr int kMaxGridY = 65535;

// Sum over the block (kRowThreads threads); every thread gets the result.
__device__ float block_sum(float v) {
  __shared__ float warp_sums[kRowThreads / 32];
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();  // warp_sums may still be read by a previous call
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();
  float total = 0;
#pragma unroll
  for (int w = 0; w < kRowThreads / 32; ++w) total += warp_sums[w];
  return total;
}

__global__ void embed_kernel(const int32_t* tokens, const int32_t* from, const int32_t* picks, const __nv_bfloat16* table,
                             int64_t width, float* out) {
  chained_kernel_start();
  const int32_t f = from[blockIdx.x];
  const int32_t token = f >= 0 ? picks[f] : tokens[blockIdx.x];
  const __nv_bfloat16* src = table + static_cast<int64_t>(token) * width;
  float* dst = out + static_cast<int64_t>(blockIdx.x) * width;
  for (int64_t i = threadIdx.x; i < width; i += kRowThreads) dst[i] = __bfloat162float(src[i]);
}

__global__ void rms_norm_kernel(const float* x, int64_t ldx, const float* w, __nv_bfloat16* y, int64_t ldy, int64_t width,
                                float eps, const int32_t* row_index) {
  chained_kernel_start();
  const int64_t src_row = row_index ? row_index[blockIdx.x] : blockIdx.x;
  const float* xr = x + src_row * ldx;
  float ss = 0;
  for (int64_t i = threadIdx.x; i < width; i += kRowThreads) ss += xr[i] * xr[i];
  const float scale = rsqrtf(block_sum(ss) / static_cast<float>(width) + eps);
  __nv_bfloat16* yr = y + static_cast<int64_t>(blockIdx.x) * ldy;
  for (int64_t i = threadIdx.x; i < width; i += kRowThreads) yr[i] = __float2bfloat16_rn(xr[i] * scale * w[i]);
}

// Rows of a width in whole float4s, 16-byte aligned: 256 threads, float4 loads and 8-byte stores,
// and the sum of squares in the order of the weight-streaming kernels that normalise rows
// themselves (row_norm.cuh), so fused and separate norms give the same bits. (The scalar kernel
// above moved a prompt's rows at ~45% of copy bandwidth.)
constexpr int kNormThreads = 256;
__global__ void __launch_bounds__(kNormThreads) rms_norm4_kernel(const float* x, int64_t ldx, const float* w, __nv_bfloat16* y, int64_t ldy,
                                                                 int64_t width, float eps, const int32_t* row_index) {
  __shared__ float warp_sums[kNormThreads / 32];
  chained_kernel_start();
  const int64_t src_row = row_index ? row_index[blockIdx.x] : blockIdx.x;
  const float* xr = x + src_row * ldx;
  const float ss = warp_square_sum<kNormThreads>(xr, width);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) warp_sums[warp] = ss;
  __syncthreads();
  const float scale = rms_scale<kNormThreads / 32>(warp_sums, 1, width, eps);
  __nv_bfloat16* yr = y + static_cast<int64_t>(blockIdx.x) * ldy;
  for (int64_t i = 4 * static_cast<int64_t>(threadIdx.x); i < width; i += 4 * kNormThreads)
    *reinterpret_cast<uint2*>(yr + i) =
        normalise4_bf16(*reinterpret_cast<const float4*>(xr + i), __ldg(reinterpret_cast<const float4*>(w + i)), scale);
}

// Blocks along x cover a row's width, blocks along y its rows (looping past 65535 rows).
__device__ __forceinline__ float to_f32(float x) { return x; }
__device__ __forceinline__ float to_f32(__nv_bfloat16 x) { return __bfloat162float(x); }

template <typename In>
__global__ void swiglu_kernel(const In* gu, int64_t ld_gu, __nv_bfloat16* out, int64_t ld_out, int64_t rows, int64_t width) {
  chained_kernel_start();
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    const In* g = gu + r * ld_gu;
    __nv_bfloat16* o = out + r * ld_out;
    for (int64_t i = blockIdx.x * static_cast<int64_t>(kThreads) + threadIdx.x; i < width; i += static_cast<int64_t>(gridDim.x) * kThreads)
      o[i] = __float2bfloat16_rn(swiglu(to_f32(g[i]), to_f32(g[width + i])));
  }
}

// Four bf16 gate and up values as f32.
__device__ __forceinline__ float4 load4(const float* p) { return *reinterpret_cast<const float4*>(p); }
__device__ __forceinline__ float4 load4(const __nv_bfloat16* p) {
  const uint2 v = *reinterpret_cast<const uint2*>(p);
  const float2 lo = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&v.x));
  const float2 hi = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&v.y));
  return make_float4(lo.x, lo.y, hi.x, hi.y);
}

// Prompt-sized calls: four columns per thread, 16-byte loads and 8-byte stores (bandwidth-bound).
template <typename In>
__global__ void swiglu4_kernel(const In* gu, int64_t ld_gu, __nv_bfloat16* out, int64_t ld_out, int64_t rows, int64_t width) {
  chained_kernel_start();
  const int64_t quads = width / 4;
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    const In* g = gu + r * ld_gu;
    const In* u = gu + r * ld_gu + width;
    uint2* o = reinterpret_cast<uint2*>(out + r * ld_out);
    for (int64_t i = blockIdx.x * static_cast<int64_t>(kThreads) + threadIdx.x; i < quads; i += static_cast<int64_t>(gridDim.x) * kThreads) {
      const float4 a = load4(g + 4 * i), b = load4(u + 4 * i);
      const __nv_bfloat162 lo = __floats2bfloat162_rn(swiglu(a.x, b.x), swiglu(a.y, b.y));
      const __nv_bfloat162 hi = __floats2bfloat162_rn(swiglu(a.z, b.z), swiglu(a.w, b.w));
      o[i] = make_uint2(*reinterpret_cast<const uint32_t*>(&lo), *reinterpret_cast<const uint32_t*>(&hi));
    }
  }
}

__global__ void add_kernel(float* y, const float* x, int64_t n) {
  chained_kernel_start();
  for (int64_t i = blockIdx.x * static_cast<int64_t>(kThreads) + threadIdx.x; i < n; i += static_cast<int64_t>(gridDim.x) * kThreads)
    y[i] += x[i];
}

__global__ void to_bf16_kernel(const float* x, int64_t ldx, __nv_bfloat16* y, int64_t ldy, int64_t width) {
  chained_kernel_start();
  const float* xr = x + static_cast<int64_t>(blockIdx.x) * ldx;
  __nv_bfloat16* yr = y + static_cast<int64_t>(blockIdx.x) * ldy;
  for (int64_t i = threadIdx.x; i < width; i += kThreads) yr[i] = __float2bfloat16_rn(xr[i]);
}

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

__global__ void argmax_kernel(const float* x, int64_t ldx, int64_t width, int64_t span, int32_t* out, int32_t* mirror,
                              float2* candidates) {
  chained_kernel_start();
  const int64_t row = blockIdx.y, c0 = blockIdx.x * span, c1 = min(width, c0 + span);
  const float* xr = x + row * ldx;
  float v = -INFINITY;
  int32_t i = INT32_MAX;
#pragma unroll 4  // several loads in flight (same comparisons, same order)
  for (int64_t c = c0 + threadIdx.x; c < c1; c += kRowThreads) {
    const float xc = xr[c];
    if (xc > v || i == INT32_MAX) {  // NaN is never larger; a thread's first column seeds it
      v = xc != xc ? -INFINITY : xc;
      i = static_cast<int32_t>(c);
    }
  }
  block_argmax(v, i);
  if (threadIdx.x != 0) return;
  if (gridDim.x == 1) {
    out[row] = i;
    if (mirror) mirror[row] = i;
  } else
    candidates[row * gridDim.x + blockIdx.x] = make_float2(v, __int_as_float(i));
}

// One warp per row: the best of the row's part candidates (parts of an empty range hold INT32_MAX,
// never better than a real column).
__global__ void argmax_pick_kernel(const float2* candidates, int parts, int32_t* out, int32_t* mirror) {
  chained_kernel_start();
  const int lane = threadIdx.x;
  float v = -INFINITY;
  int32_t i = INT32_MAX;
  for (int p = lane; p < parts; p += 32) {
    const float2 c = candidates[static_cast<int64_t>(blockIdx.x) * parts + p];
    keep_better(v, i, c.x, __float_as_int(c.y));
  }
  for (int o = 16; o > 0; o /= 2) keep_better(v, i, __shfl_xor_sync(0xffffffffu, v, o), __shfl_xor_sync(0xffffffffu, i, o));
  if (lane != 0) return;
  out[blockIdx.x] = i;
  if (mirror) mirror[blockIdx.x] = i;
}

__global__ void copy_kernel(const uint4* src, uint4* dst, int64_t n) {
  chained_kernel_start();
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n; i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    dst[i] = src[i];
}

int argmax_parts(int64_t width) { return static_cast<int>(std::clamp<int64_t>(width / kArgmaxMinSpan, 1, kArgmaxParts)); }

void check_rows(int64_t rows, const char* op) {
  if (rows < 0 || rows > (1ll << 31) - 1) fail(op, ": ", rows, " rows is out of range");
}

}  // namespace

void embed_rows(const int32_t* tokens, const int32_t* from, const int32_t* picks, int64_t rows, const __nv_bfloat16* table,
                int64_t width, float* out, cudaStream_t stream) {
  check_rows(rows, "embed_rows");
  if (rows == 0) return;
  launch_chained(embed_kernel, dim3(static_cast<unsigned>(rows)), dim3(kRowThreads), 0, stream, tokens, from, picks, table, width, out);
  QWENRT_CUDA_CHECK_LAUNCH();
}

std::size_t argmax_workspace_bytes(int64_t rows, int64_t width) {
  const int parts = argmax_parts(width);
  return parts == 1 ? 0 : static_cast<std::size_t>(rows) * parts * sizeof(float2);
}

void argmax_rows(const float* x, int64_t ldx, int64_t rows, int64_t width, int32_t* out, cudaStream_t stream, void* workspace,
                 std::size_t workspace_bytes, int32_t* mirror) {
  check_rows(rows, "argmax_rows");
  if (width < 1 || width > (1ll << 31) - 1 || ldx < width) fail("argmax_rows: width ", width, " must be 1 to 2^31-1 and at most ldx ", ldx);
  if (rows > kMaxGridY) fail("argmax_rows: ", rows, " rows; it takes up to ", kMaxGridY);
  if (reinterpret_cast<uintptr_t>(workspace) % alignof(float2) != 0) fail("argmax_rows: the workspace is not 8-byte aligned");
  if (rows == 0) return;
  // Without (enough) workspace: one block per row.
  const int parts = workspace && workspace_bytes >= argmax_workspace_bytes(rows, width) ? argmax_parts(width) : 1;
  const int64_t span = (width + parts - 1) / parts;
  auto* candidates = static_cast<float2*>(workspace);
  launch_chained(argmax_kernel, dim3(static_cast<unsigned>(parts), static_cast<unsigned>(rows)), dim3(kRowThreads), 0, stream, x, ldx, width,
                 span, out, mirror, candidates);
  QWENRT_CUDA_CHECK_LAUNCH();
  if (parts == 1) return;
  launch_chained(argmax_pick_kernel, dim3(static_cast<unsigned>(rows)), dim3(32), 0, stream, static_cast<const float2*>(candidates), parts, out, mirror);
  QWENRT_CUDA_CHECK_LAUNCH();
}

void copy_in_kernel(const void* src, void* dst, std::size_t bytes, cudaStream_t stream) {
  if (bytes % 16 != 0 || reinterpret_cast<uintptr_t>(src) % 16 != 0 || reinterpret_cast<uintptr_t>(dst) % 16 != 0)
    fail("copy_in_kernel: ", bytes, " bytes must be whole 16-byte words at 16-byte aligned addresses");
  if (bytes == 0) return;
  const int64_t n = static_cast<int64_t>(bytes / 16);
  const int64_t blocks = std::min<int64_t>((n + 255) / 256, 1024);
  launch_chained(copy_kernel, dim3(static_cast<unsigned>(blocks)), dim3(256), 0, stream, static_cast<const uint4*>(src), static_cast<uint4*>(dst), n);
  QWENRT_CUDA_CHECK_LAUNCH();
}

void rms_norm_rows(const float* x, int64_t ldx, const float* w, __nv_bfloat16* y, int64_t ldy, int64_t rows, int64_t width,
                   float eps, cudaStream_t stream, const int32_t* row_index) {
  check_rows(rows, "rms_norm_rows");
  if (rows == 0) return;
  const bool vector = width % 4 == 0 && ldx % 4 == 0 && ldy % 4 == 0 &&
                      (reinterpret_cast<uintptr_t>(x) | reinterpret_cast<uintptr_t>(w)) % 16 == 0 && reinterpret_cast<uintptr_t>(y) % 8 == 0;
  if (vector)
    launch_chained(rms_norm4_kernel, dim3(static_cast<unsigned>(rows)), dim3(kNormThreads), 0, stream, x, ldx, w, y, ldy, width, eps, row_index);
  else
    launch_chained(rms_norm_kernel, dim3(static_cast<unsigned>(rows)), dim3(kRowThreads), 0, stream, x, ldx, w, y, ldy, width, eps, row_index);
  QWENRT_CUDA_CHECK_LAUNCH();
}

namespace {
template <typename In>
void swiglu_rows_of(const In* gu, int64_t ld_gu, __nv_bfloat16* out, int64_t ld_out, int64_t rows, int64_t width, cudaStream_t stream) {
  check_rows(rows, "swiglu_rows");
  if (rows == 0) return;
  const bool vector = rows > 8 && width % 4 == 0 && ld_gu % 4 == 0 && ld_out % 4 == 0 &&
                      reinterpret_cast<uintptr_t>(gu) % (4 * sizeof(In)) == 0 && reinterpret_cast<uintptr_t>(out) % 8 == 0;
  const int64_t per_thread = vector ? 4 : 1;
  const int64_t across = std::min<int64_t>((width / per_thread + kThreads - 1) / kThreads, 1024);
  const dim3 grid(static_cast<unsigned>(across), static_cast<unsigned>(std::min<int64_t>(rows, kMaxGridY)));
  launch_chained(vector ? swiglu4_kernel<In> : swiglu_kernel<In>, grid, dim3(kThreads), 0, stream, gu, ld_gu, out, ld_out, rows, width);
  QWENRT_CUDA_CHECK_LAUNCH();
}
}  // namespace

void swiglu_rows(const float* gu, int64_t ld_gu, __nv_bfloat16* out, int64_t ld_out, int64_t rows, int64_t width, cudaStream_t stream) {
  swiglu_rows_of(gu, ld_gu, out, ld_out, rows, width, stream);
}

void swiglu_rows(const __nv_bfloat16* gu, int64_t ld_gu, __nv_bfloat16* out, int64_t ld_out, int64_t rows, int64_t width,
                 cudaStream_t stream) {
  swiglu_rows_of(gu, ld_gu, out, ld_out, rows, width, stream);
}

void add_in_place(float* y, const float* x, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  const int64_t blocks = std::min<int64_t>((n + kThreads - 1) / kThreads, 4096);
  launch_chained(add_kernel, dim3(static_cast<unsigned>(blocks)), dim3(kThreads), 0, stream, y, x, n);
  QWENRT_CUDA_CHECK_LAUNCH();
}

void to_bf16_rows(const float* x, int64_t ldx, __nv_bfloat16* y, int64_t ldy, int64_t rows, int64_t width, cudaStream_t stream) {
  check_rows(rows, "to_bf16_rows");
  if (rows == 0) return;
  launch_chained(to_bf16_kernel, dim3(static_cast<unsigned>(rows)), dim3(kThreads), 0, stream, x, ldx, y, ldy, width);
  QWENRT_CUDA_CHECK_LAUNCH();
}

}  // namespace qwenrt::cuda
