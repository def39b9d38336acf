#pragma once
// Captured CUDA graphs bake device and pinned-host addresses. Whenever memory such a graph may
// point into moves (a scratch buffer, a KV pool or a step's pinned entry grows), the epoch goes up
// and every graph captured before it is stale (model/cuda/graph_cache).
#include <cstdint>

namespace qwenrt {

inline uint64_t& memory_epoch_counter() {
  static uint64_t epoch = 1;
  return epoch;
}
inline uint64_t memory_epoch() { return memory_epoch_counter(); }
inline void bump_memory_epoch() { ++memory_epoch_counter(); }

}  // namespace qwenrt
