#pragma once
// The CUDA backend's run-time switches, read from the environment once: one field per
// QWENRT_CUDA_* variable. `qwenrt info` prints them (describe()); docs/cuda.md has the table.
// Plain C++ (no CUDA headers), so the parsing is tested without a GPU.
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace qwenrt::cuda {

struct RuntimeOptions {
  // QWENRT_CUDA_GRAPHS=0|1 (default 1): decode steps of up to 8 rows are captured once per shape
  // as CUDA graphs and replayed. 0 enqueues every kernel on every step. (Off while profiling.)
  bool graphs = true;
  // QWENRT_CUDA_PDL=0|1 (default 1): chained launches (programmatic dependent launch) on compute
  // capability 9.x: the next kernel starts, and prefetches its weights, while this one finishes.
  // 0 serialises launches as on other GPUs.
  bool pdl = true;
  // QWENRT_CUDA_PREFETCH_L2=0|1 (default 1): plain skinny GEMM launches whose weights fit in L2
  // beside the step (<= 40 MiB) prefetch them into L2 before waiting for the kernel ahead.
  bool prefetch_l2 = true;
  // QWENRT_CUDA_PROFILE=0|1 (default 0): time every part of a step with events on the stream and
  // print GPU time by part at exit (no graphs then).
  bool profile = false;
  // QWENRT_CUDA_LAUNCH_TRACE=file.csv (default empty: off): write every chained kernel block's
  // wait and start times there; needs a build with -DQWENRT_CUDA_LAUNCH_TRACE=ON (an Error without).
  std::string launch_trace;
  // QWENRT_CUDA_STATE_WGMMA=0|1 (default 1): the chunked DeltaNet window's `state` kernel on
  // warpgroup products (sm_90a, blocks of 64 state columns: 9B/27B head counts); 0 runs the
  // mma.sync kernel, as other GPUs and smaller head counts do. H200, 2026-12-05: 27B window at 8k
  // rows 1.10 -> 1.05 ms, at 32k 4.19 -> 3.99 ms; 9B 8k 0.80 -> 0.77 ms.
  bool state_wgmma = true;
  // QWENRT_CUDA_MOE_WGMMA=0|1 (default 1): the MoE grouped GEMMs of prompt windows (128-row tiles)
  // on warpgroup products (sm_90a); 0 runs the mma.sync kernel, as other GPUs do.
  bool moe_wgmma = true;

  // (name, value) pairs in the order above: graphs=1 pdl=1 prefetch_l2=1 profile=0 launch_trace= state_wgmma=1 moe_wgmma=1.
  std::vector<std::pair<std::string, std::string>> describe() const;
};

// The options from `lookup` (a variable's value, or null when unset; std::getenv for the
// environment). Unset or empty variables keep their defaults; any other value than the accepted
// ones is an Error naming the variable and the values it takes.
RuntimeOptions parse_runtime_options(const std::function<const char*(const char*)>& lookup);

// The options of this process, parsed from the environment on the first call.
const RuntimeOptions& runtime_options();

// For tests and tools (tools/cuda_emu) that run both sides of a switch in one process: replaces
// what runtime_options() returns until the end of the scope. Not thread-safe: nothing may read the
// options on another thread meanwhile. A CudaForward reads graphs, profile and launch_trace when it
// is built; the kernels' switches are read at every launch.
class ScopedRuntimeOptions {
 public:
  explicit ScopedRuntimeOptions(const RuntimeOptions& options);
  ~ScopedRuntimeOptions();
  ScopedRuntimeOptions(const ScopedRuntimeOptions&) = delete;
  ScopedRuntimeOptions& operator=(const ScopedRuntimeOptions&) = delete;

 private:
  RuntimeOptions saved_;
};

}  // namespace qwenrt::cuda
