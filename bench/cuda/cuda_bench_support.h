#pragma once
// Timing helpers shared by the CUDA benchmarks: the median time per launch of work captured into a
// CUDA graph (launch gaps hidden, as in the engine's decode step), or of calls timed with events.
// The copy-bandwidth ceiling is cuda::copy_bandwidth_GBps (backend/cuda/diagnostics/device_measure.h).
#include <cuda_runtime.h>

#include <algorithm>
#include <functional>
#include <vector>

#include "backend/cuda/runtime/cuda_check.h"

namespace qwenrt::bench {

// Captures `reps` calls of enqueue(i, stream) into one graph, replays it, and returns the median
// microseconds per call.
inline double graph_us_per_call(int reps, const std::function<void(int, cudaStream_t)>& enqueue, int replays = 7) {
  cudaStream_t s;
  QWENRT_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  for (int i = 0; i < 3; ++i) enqueue(i, s);  // warm-up outside the graph (module load, handles)
  QWENRT_CUDA_CHECK(cudaStreamSynchronize(s));
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  QWENRT_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < reps; ++i) enqueue(i, s);
  QWENRT_CUDA_CHECK(cudaStreamEndCapture(s, &graph));
  QWENRT_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  cudaEvent_t t0, t1;
  QWENRT_CUDA_CHECK(cudaEventCreate(&t0));
  QWENRT_CUDA_CHECK(cudaEventCreate(&t1));
  QWENRT_CUDA_CHECK(cudaGraphLaunch(exec, s));  // warm replay
  std::vector<float> ms;
  for (int i = 0; i < replays; ++i) {
    QWENRT_CUDA_CHECK(cudaEventRecord(t0, s));
    QWENRT_CUDA_CHECK(cudaGraphLaunch(exec, s));
    QWENRT_CUDA_CHECK(cudaEventRecord(t1, s));
    QWENRT_CUDA_CHECK(cudaEventSynchronize(t1));
    float m = 0;
    QWENRT_CUDA_CHECK(cudaEventElapsedTime(&m, t0, t1));
    ms.push_back(m);
  }
  cudaEventDestroy(t0);
  cudaEventDestroy(t1);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(s);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2] * 1e3 / reps;
}

// Median milliseconds of one call of f(), from `samples` samples of `per_sample` back-to-back calls
// timed with events on `stream`.
template <typename F>
double median_ms(F&& f, int samples, int per_sample, cudaStream_t stream) {
  cudaEvent_t e0, e1;
  QWENRT_CUDA_CHECK(cudaEventCreate(&e0));
  QWENRT_CUDA_CHECK(cudaEventCreate(&e1));
  std::vector<double> t;
  for (int s = 0; s < samples; ++s) {
    QWENRT_CUDA_CHECK(cudaEventRecord(e0, stream));
    for (int i = 0; i < per_sample; ++i) f();
    QWENRT_CUDA_CHECK(cudaEventRecord(e1, stream));
    QWENRT_CUDA_CHECK(cudaEventSynchronize(e1));
    float ms = 0;
    QWENRT_CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
    t.push_back(ms / per_sample);
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  std::nth_element(t.begin(), t.begin() + t.size() / 2, t.end());
  return t[t.size() / 2];
}

}  // namespace qwenrt::bench
