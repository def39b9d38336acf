#pragma once
// The machine's own memory ceilings, measured in the same run as a benchmark so results can be
// stated as fractions of them.
#include <cstddef>

#include "core/thread_pool.h"

namespace qwenrt::cpu {

struct Bandwidth {
  double read_GBps;  // streaming read of a buffer far larger than the caches (what decode does)
  double copy_GBps;  // STREAM-style copy, counting bytes read plus bytes written
};

Bandwidth measure_bandwidth(ThreadPool& pool, std::size_t bytes = std::size_t(1) << 30, int repeats = 5);

}  // namespace qwenrt::cpu
