#pragma once
// Device side of the launch trace (launch_trace.h): the buffer pointer of this translation unit and
// the record made around each grid_dependency_wait(). Empty unless QWENRT_CUDA_LAUNCH_TRACE.
#include "backend/cuda/diagnostics/launch_trace.h"

#ifdef QWENRT_CUDA_LAUNCH_TRACE
#include <cuda_runtime.h>

namespace qwenrt::cuda {
namespace {
__device__ LaunchTraceBuffer launch_trace_buffer;

void set_launch_trace_buffer(const LaunchTraceBuffer& b) { cudaMemcpyToSymbol(launch_trace_buffer, &b, sizeof b); }
[[maybe_unused]] const bool launch_trace_registered = register_launch_trace_setter(&set_launch_trace_buffer);

// Thread 0 of each block: one event (the times from global_time_ns, mma.cuh).
__device__ __forceinline__ void launch_trace_record(uint64_t start_ns, uint64_t ready_ns) {
  const LaunchTraceBuffer b = launch_trace_buffer;
  if (b.events == nullptr || threadIdx.x + threadIdx.y + threadIdx.z != 0) return;
  const uint32_t i = atomicAdd(b.count, 1u);
  if (i >= b.capacity) return;
  LaunchTraceEvent e;
  asm volatile("mov.u64 %0, %%gridid;" : "=l"(e.grid_id));
  asm volatile("mov.u32 %0, %%smid;" : "=r"(e.sm));
  e.start_ns = start_ns;
  e.ready_ns = ready_ns;
  e.block = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  e.blocks = gridDim.x * gridDim.y * gridDim.z;
  e.threads = blockDim.x * blockDim.y * blockDim.z;
  b.events[i] = e;
}
}  // namespace
}  // namespace qwenrt::cuda
#endif
