#include "model/cuda/graph_cache.h"

#include "backend/cuda/runtime/cuda_check.h"
#include "model/cuda/memory_epoch.h"

namespace qwenrt {

GraphCache::~GraphCache() {
  for (auto& [key, g] : graphs_)
    if (g.exec) cudaGraphExecDestroy(g.exec);
}

GraphOutputs GraphCache::run(const Shape& shape, int entry, cudaStream_t stream, const std::function<GraphOutputs()>& enqueue) {
  Graph& g = graphs_[std::tuple_cat(shape, std::make_tuple(entry))];
  uint64_t& seen = shapes_seen_[shape];
  if (g.exec && g.epoch == memory_epoch()) {
    QWENRT_CUDA_CHECK(cudaGraphLaunch(g.exec, stream));
    return g.outputs;
  }
  if (seen != memory_epoch()) {
    // First sight of the shape (or memory moved since): eagerly, sizing every buffer it needs.
    const GraphOutputs out = enqueue();
    seen = memory_epoch();
    return out;
  }
  // Second sight: capture (a graph per host-side entry: it bakes the entry's pinned buffers), then replay.
  if (g.exec) cudaGraphExecDestroy(g.exec);
  g.exec = nullptr;
  cudaGraph_t graph;
  QWENRT_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  try {
    g.outputs = enqueue();
  } catch (...) {
    cudaStreamEndCapture(stream, &graph);
    throw;
  }
  QWENRT_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  const cudaError_t err = cudaGraphInstantiate(&g.exec, graph, 0);
  cudaGraphDestroy(graph);
  QWENRT_CUDA_CHECK(err);
  g.epoch = memory_epoch();
  QWENRT_CUDA_CHECK(cudaGraphLaunch(g.exec, stream));
  return g.outputs;
}

}  // namespace qwenrt
