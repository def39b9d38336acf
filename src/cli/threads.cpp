#include <thread>

#include "cli/commands.h"
#include "cli/options.h"
#include "core/thread_pool.h"

namespace qwenrt::cli {

void apply_threads(const Options& options) {
  const int64_t hw = std::max(1u, std::thread::hardware_concurrency());
  ThreadPool::set_global_threads(static_cast<int>(options.integer_or("threads", hw, 1, 1024)));
}

}  // namespace qwenrt::cli
