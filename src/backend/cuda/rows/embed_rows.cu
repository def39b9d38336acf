// embed_rows: out[r, :] = table[token_r, :] in f32, with a row's token taken from the previous
// step's pick still on the device where asked (embed_rows.h).
#include <cstdint>

#include "backend/cuda/ptx/mma.cuh"
#include "backend/cuda/rows/embed_rows.h"
#include "backend/cuda/rows/row_launch.h"
#include "backend/cuda/runtime/chained_launch.h"
#include "backend/cuda/runtime/cuda_check.h"

namespace qwenrt::cuda {
namespace {
using namespace row_launch;

__global__ void embed_kernel(const int32_t* tokens, const int32_t* from, const int32_t* picks, const __nv_bfloat16* table, int64_t width,
                             float* out) {
  chained_kernel_start();
  const int32_t f = from[blockIdx.x];
  const int32_t token = f >= 0 ? picks[f] : tokens[blockIdx.x];
  const __nv_bfloat16* src = table + static_cast<int64_t>(token) * width;
  float* dst = out + static_cast<int64_t>(blockIdx.x) * width;
  for (int64_t i = threadIdx.x; i < width; i += kRowThreads) dst[i] = __bfloat162float(src[i]);
}

}  // namespace

void embed_rows(const int32_t* tokens, const int32_t* from, const int32_t* picks, int64_t rows, const __nv_bfloat16* table, int64_t width, float* out,
                cudaStream_t stream) {
  check_rows(rows, "embed_rows");
  if (rows == 0) return;
  launch_chained(embed_kernel, dim3(static_cast<unsigned>(rows)), dim3(kRowThreads), 0, stream, tokens, from, picks, table, width, out);
  QWENRT_CUDA_CHECK_LAUNCH();
}

}  // namespace qwenrt::cuda
