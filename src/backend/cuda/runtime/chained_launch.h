#pragma once
// Kernel launches that let the next kernel on the stream start before this one has finished
// (programmatic dependent launch, sm_90+). A kernel launched this way must call
// grid_dependency_wait() (mma.cuh) before it touches memory that earlier kernels write or read;
// what it does before that (prefetching weights) overlaps their tail, and its launch overlaps
// their run. Only on compute capability 9.x, where the sm_90a code (with the waits) runs; elsewhere,
// or with QWENRT_CUDA_PDL=0, launches serialize as usual.
#include <cuda_runtime.h>

#include <cstddef>

#include "backend/cuda/runtime/cuda_check.h"

namespace qwenrt::cuda {

// Whether launches on the current device use it (compute capability 9.x, not switched off).
bool chained_launch_enabled();

template <typename... Params, typename... Args>
void launch_chained(void (*kernel)(Params...), dim3 grid, dim3 block, std::size_t smem, cudaStream_t stream, Args... args) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = chained_launch_enabled() ? 1 : 0;
  const cudaError_t err = cudaLaunchKernelEx(&cfg, kernel, static_cast<Params>(args)...);
  if (err != cudaSuccess) {
    cudaGetLastError();  // a refused launch is not sticky: leave nothing for the next check to trip on
    QWENRT_CUDA_CHECK(err);
  }
}

}  // namespace qwenrt::cuda
