// Host side of the launch trace: the device buffers, the registered per-file setters and the CSV
// written at the end (launch_trace.h).
#include <cuda_runtime.h>

#include <cstdio>
#include <mutex>
#include <stdexcept>
#include <vector>

#include "backend/cuda/diagnostics/launch_trace.h"
#include "backend/cuda/runtime/cuda_check.h"

namespace qwenrt::cuda {
namespace {
std::mutex& setters_mutex() {
  static std::mutex m;
  return m;
}
std::vector<LaunchTraceSetter>& setters() {
  static std::vector<LaunchTraceSetter> s;
  return s;
}
cudaError_t set_all(const LaunchTraceBuffer& b) {
  std::lock_guard<std::mutex> lock(setters_mutex());
  for (auto set : setters()) set(b);
  return cudaGetLastError();
}
}  // namespace

bool launch_trace_built() {
#ifdef QWENRT_CUDA_LAUNCH_TRACE
  return true;
#else
  return false;
#endif
}

bool register_launch_trace_setter(LaunchTraceSetter setter) {
  std::lock_guard<std::mutex> lock(setters_mutex());
  setters().push_back(setter);
  return true;
}

LaunchTrace::LaunchTrace(std::string path, uint32_t capacity) : path_(std::move(path)), capacity_(capacity) {
  if (!launch_trace_built())
    throw std::runtime_error("QWENRT_CUDA_LAUNCH_TRACE: this build has no launch trace (configure with -DQWENRT_CUDA_LAUNCH_TRACE=ON)");
  events_ = DeviceBuffer(sizeof(LaunchTraceEvent) * capacity);
  count_ = DeviceBuffer(sizeof(uint32_t));
  QWENRT_CUDA_CHECK(cudaMemset(count_.get(), 0, sizeof(uint32_t)));
  QWENRT_CUDA_CHECK(set_all(buffer()));
}

LaunchTrace::~LaunchTrace() {
  // A destructor reports failures rather than throwing them.
  cudaDeviceSynchronize();
  set_all(LaunchTraceBuffer{});
  uint32_t n = 0;
  cudaMemcpy(&n, count_.get(), sizeof n, cudaMemcpyDeviceToHost);
  const uint32_t kept = n < capacity_ ? n : capacity_;
  std::vector<LaunchTraceEvent> events(kept);
  cudaMemcpy(events.data(), events_.get(), sizeof(LaunchTraceEvent) * kept, cudaMemcpyDeviceToHost);
  if (FILE* f = std::fopen(path_.c_str(), "w")) {
    std::fprintf(f, "grid_id,start_ns,ready_ns,block,blocks,threads,sm\n");
    for (const auto& e : events)
      std::fprintf(f, "%llu,%llu,%llu,%u,%u,%u,%u\n", static_cast<unsigned long long>(e.grid_id), static_cast<unsigned long long>(e.start_ns),
                   static_cast<unsigned long long>(e.ready_ns), e.block, e.blocks, e.threads, e.sm);
    std::fclose(f);
    std::fprintf(stderr, "launch trace: %u events (%u dropped) written to %s\n", kept, n - kept, path_.c_str());
  } else {
    std::fprintf(stderr, "launch trace: cannot write %s\n", path_.c_str());
  }
}

}  // namespace qwenrt::cuda
