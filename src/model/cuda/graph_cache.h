#pragma once
// Decode (and committed) steps replayed from captured CUDA graphs. A step's shape (rows, length
// bound, table stride, cache, argmax, pattern) and its host-side entry key a graph: the first time a shape runs in a memory epoch
// it runs eagerly (so every buffer it needs exists), the second time it is captured, then replayed.
// A graph captured before the memory epoch moved on is stale and captured again.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <map>
#include <tuple>

#include "model/qwen35_graph.h"

namespace qwenrt {

class GraphCache {
 public:
  // rows, max_len, table stride, cache serial, argmax, pattern (StepShape::pattern)
  using Shape = std::tuple<int64_t, int64_t, int, uint64_t, bool, uint64_t>;

  GraphCache() = default;
  ~GraphCache();
  GraphCache(const GraphCache&) = delete;
  GraphCache& operator=(const GraphCache&) = delete;

  // Runs the step `enqueue` puts on `stream` (eagerly, by capture or by replay, see above); returns
  // where its outputs are.
  GraphOutputs run(const Shape& shape, int entry, cudaStream_t stream, const std::function<GraphOutputs()>& enqueue);

 private:
  struct Graph {
    cudaGraphExec_t exec = nullptr;
    GraphOutputs outputs;
    uint64_t epoch = 0;
  };
  std::map<std::tuple<int64_t, int64_t, int, uint64_t, bool, uint64_t, int>, Graph> graphs_;
  std::map<Shape, uint64_t> shapes_seen_;  // the epoch in which a shape last ran eagerly
};

}  // namespace qwenrt
