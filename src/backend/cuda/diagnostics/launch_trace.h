#pragma once
// Launch trace (a diagnostic build, -DQWENRT_CUDA_LAUNCH_TRACE=ON): every block of every chained
// kernel records when it reached grid_dependency_wait() and when that wait returned, with the
// launch's %gridid, so a decode step replayed from its CUDA graph can be laid out kernel by
// kernel: when each launch's blocks became resident (prefetching weights), when its inputs were
// ready (the kernel ahead had finished) and how long it held the chain. Profilers can't show
// this: ncu runs kernels one at a time, and nsys does not run on the lent GPU machine.
// In a normal build the kernels carry no trace code and these functions report that.
#include <cstdint>
#include <string>

#include "backend/cuda/runtime/device_buffer.h"

namespace qwenrt::cuda {

struct LaunchTraceEvent {
  uint64_t grid_id;   // %gridid: one per launch (graph replays included)
  uint64_t start_ns;  // %globaltimer as the block reached the wait
  uint64_t ready_ns;  // ... and as the wait returned
  uint32_t block;     // linear block index
  uint32_t blocks;    // blocks in the launch
  uint32_t threads;   // threads per block
  uint32_t sm;        // %smid
};

struct LaunchTraceBuffer {
  LaunchTraceEvent* events = nullptr;
  uint32_t* count = nullptr;  // events claimed (may pass capacity: those past it are dropped)
  uint32_t capacity = 0;
};

// Whether the kernels were built with the trace.
bool launch_trace_built();
// Each translation unit with chained kernels registers how to point its copy of the device-side
// buffer pointer (launch_trace.cuh); enabling sets them all.
using LaunchTraceSetter = void (*)(const LaunchTraceBuffer&);
bool register_launch_trace_setter(LaunchTraceSetter setter);

// Records events on the current device from now on (up to `capacity`), then writes them as CSV to
// `path` when destroyed. Throws if the build has no trace.
class LaunchTrace {
 public:
  LaunchTrace(std::string path, uint32_t capacity);
  ~LaunchTrace();
  LaunchTrace(const LaunchTrace&) = delete;
  LaunchTrace& operator=(const LaunchTrace&) = delete;

 private:
  LaunchTraceBuffer buffer() const { return {events_.as<LaunchTraceEvent>(), count_.as<uint32_t>(), capacity_}; }

  std::string path_;
  uint32_t capacity_;
  DeviceBuffer events_, count_;
};

}  // namespace qwenrt::cuda
