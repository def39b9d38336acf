// Whether this build carries sm_90a code and the current device runs it: the gate of every wgmma
// path (wgmma_probe.h).
#include <cuda_runtime_api.h>

#include "backend/cuda/ptx/wgmma.cuh"
#include "backend/cuda/runtime/wgmma_probe.h"

namespace qwenrt::cuda {
namespace {
// 1 where this build has the sm_90a code and runs on it.
__global__ void wgmma_probe_kernel(int* out) {
#ifdef QWENRT_WGMMA
  *out = 1;
#else
  *out = 0;
#endif
}
}  // namespace

bool wgmma_available() {
  static const bool available = [] {
    int device = 0;
    cudaDeviceProp prop{};
    if (cudaGetDevice(&device) != cudaSuccess || cudaGetDeviceProperties(&prop, device) != cudaSuccess || prop.major != 9) return false;
    int* flag = nullptr;
    int host = 0;
    if (cudaMalloc(&flag, sizeof(int)) != cudaSuccess) return false;
    wgmma_probe_kernel<<<1, 1>>>(flag);
    const bool ok = cudaMemcpy(&host, flag, sizeof(int), cudaMemcpyDeviceToHost) == cudaSuccess;
    cudaFree(flag);
    return ok && host == 1;
  }();
  return available;
}

}  // namespace qwenrt::cuda
