#pragma once
// Timing helper shared by the CUDA benchmarks: the median time per launch of work captured into a
// CUDA graph (launch gaps hidden, as in the engine's decode step). The copy-bandwidth ceiling is
// cuda::copy_bandwidth_GBps (backend/cuda/device_measure.h).
#include <cuda_runtime.h>

#include <algorithm>
#include <functional>
#include <vector>

#include "backend/cuda/cuda_check.h"

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

}  // namespace qwenrt::bench
