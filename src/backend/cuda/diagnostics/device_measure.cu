// Device copy bandwidth, device memory in use and uniform bf16 fills for synthetic weights
// (device_measure.h).
#include <algorithm>
#include <vector>

#include "backend/cuda/diagnostics/device_measure.h"
#include "backend/cuda/runtime/cuda_check.h"
#include "backend/cuda/runtime/device_buffer.h"

namespace qwenrt::cuda {
namespace {

__global__ void fill_kernel(__nv_bfloat16* dst, std::size_t n, float scale, uint64_t seed) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    // splitmix64 of (seed, i): independent per element, so any grid gives the same values.
    uint64_t z = seed * 0x9e3779b97f4a7c15ull + i;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    const float u = static_cast<float>(z >> 40) * (1.0f / 16777216.0f) * 2.0f - 1.0f;
    dst[i] = __float2bfloat16_rn(u * scale);
  }
}

}  // namespace

double copy_bandwidth_GBps(std::size_t bytes) {
  DeviceBuffer a(bytes), b(bytes);
  QWENRT_CUDA_CHECK(cudaMemset(a.get(), 1, bytes));
  cudaEvent_t t0, t1;
  QWENRT_CUDA_CHECK(cudaEventCreate(&t0));
  QWENRT_CUDA_CHECK(cudaEventCreate(&t1));
  std::vector<float> ms;
  for (int i = 0; i < 12; ++i) {
    QWENRT_CUDA_CHECK(cudaEventRecord(t0));
    QWENRT_CUDA_CHECK(cudaMemcpyAsync(b.get(), a.get(), bytes, cudaMemcpyDeviceToDevice));
    QWENRT_CUDA_CHECK(cudaEventRecord(t1));
    QWENRT_CUDA_CHECK(cudaEventSynchronize(t1));
    float m = 0;
    QWENRT_CUDA_CHECK(cudaEventElapsedTime(&m, t0, t1));
    if (i >= 2) ms.push_back(m);  // the first copies warm the clocks
  }
  cudaEventDestroy(t0);
  cudaEventDestroy(t1);
  std::sort(ms.begin(), ms.end());
  return 2.0 * static_cast<double>(bytes) / (static_cast<double>(ms[ms.size() / 2]) * 1e-3) / 1e9;
}

std::size_t device_memory_used() {
  std::size_t free_bytes = 0, total = 0;
  QWENRT_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total));
  return total - free_bytes;
}

void fill_uniform_bf16(__nv_bfloat16* dst, std::size_t n, float scale, uint64_t seed, cudaStream_t stream) {
  if (n == 0) return;
  const std::size_t blocks = std::min<std::size_t>((n + 255) / 256, 65536);
  fill_kernel<<<static_cast<unsigned>(blocks), 256, 0, stream>>>(dst, n, scale, seed);
  QWENRT_CUDA_CHECK_LAUNCH();
}

}  // namespace qwenrt::cuda
