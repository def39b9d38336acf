#pragma once
// Every CUDA runtime call is checked: a failure becomes a qwenrt::Error naming the call, the
// source line and the runtime's own message.
#include <cuda_runtime_api.h>

#include "core/error.h"

namespace qwenrt::cuda {

[[noreturn]] inline void cuda_failed(cudaError_t err, const char* what, const char* file, int line) {
  fail("CUDA error in ", what, " (", file, ":", line, "): ", cudaGetErrorName(err), ": ", cudaGetErrorString(err));
}

}  // namespace qwenrt::cuda

#define QWENRT_CUDA_CHECK(expr)                                                                          \
  do {                                                                                                   \
    const cudaError_t qwenrt_err_ = (expr);                                                              \
    if (qwenrt_err_ != cudaSuccess) ::qwenrt::cuda::cuda_failed(qwenrt_err_, #expr, __FILE__, __LINE__); \
  } while (0)

// After a kernel launch: launch-configuration errors surface here, not at a later sync.
#define QWENRT_CUDA_CHECK_LAUNCH() QWENRT_CUDA_CHECK(cudaGetLastError())
