#pragma once
// What every block of one forward call shares: the config, the rows, the cache and the threads.
#include "cache/model_cache.h"
#include "core/thread_pool.h"
#include "model/config.h"
#include "model/step.h"

namespace qwenrt {

struct BlockContext {
  const ModelConfig& config;
  const RowLayout& layout;
  ModelCache& cache;
  ThreadPool& pool;
};

}  // namespace qwenrt
