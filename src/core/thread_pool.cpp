#include "core/thread_pool.h"

#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <memory>
#include <utility>

#include "core/error.h"

namespace qwenrt {

namespace {
// The range of task `index` out of `parts` over n items, aligned to grain.
std::pair<std::size_t, std::size_t> slice(std::size_t n, std::size_t grain, int parts, int index) {
  std::size_t blocks = (n + grain - 1) / grain;
  std::size_t b0 = blocks * index / parts, b1 = blocks * (index + 1) / parts;
  return {std::min(n, b0 * grain), std::min(n, b1 * grain)};
}
std::unique_ptr<ThreadPool>& global_slot() {
  static std::unique_ptr<ThreadPool> pool;
  return pool;
}
// How long an idle worker spins before sleeping: long enough to bridge the gap between the
// parallel loops of one forward pass, short enough not to burn a core between requests.
constexpr auto kSpin = std::chrono::microseconds(200);
}  // namespace

ThreadPool::ThreadPool(int threads) {
  if (threads < 1) fail("thread count must be at least 1, got ", threads);
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::run_slice(int index) noexcept {
  auto [b, e] = slice(job_n_, job_grain_, size(), index);
  if (b >= e) return;
  try {
    (*job_)(b, e);
  } catch (...) {
    // The loop's first error goes to the caller once every thread is out of the loop: a caller
    // that unwound at once would leave the workers running a job that no longer exists.
    std::lock_guard lock(mutex_);
    if (!error_) error_ = std::current_exception();
  }
}

void ThreadPool::worker_loop(int index) {
  unsigned long seen = 0;
  for (;;) {
    // Spin, then sleep, until a new generation (job) or stop.
    auto deadline = std::chrono::steady_clock::now() + kSpin;
    while (generation_.load(std::memory_order_acquire) == seen && !stop_.load(std::memory_order_relaxed)) {
      if (std::chrono::steady_clock::now() > deadline) {
        std::unique_lock lock(mutex_);
        wake_.wait(lock, [&] { return stop_ || generation_.load() != seen; });
        break;
      }
      _mm_pause();
    }
    if (stop_) return;
    seen = generation_.load(std::memory_order_acquire);
    run_slice(index);
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

void ThreadPool::parallel_for(std::size_t n, std::size_t grain, const std::function<void(std::size_t, std::size_t)>& fn) {
  if (n == 0) return;
  grain = std::max<std::size_t>(grain, 1);
  if (workers_.empty() || n <= grain) {
    fn(0, n);
    return;
  }
  {
    // Publish the job under the lock so a worker about to sleep cannot miss it.
    std::lock_guard lock(mutex_);
    job_ = &fn;
    job_n_ = n;
    job_grain_ = grain;
    pending_.store(static_cast<int>(workers_.size()), std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_acq_rel);
  }
  wake_.notify_all();
  run_slice(0);
  // On an oversubscribed machine the workers may need this core: yield after a short spin.
  for (int spins = 0; pending_.load(std::memory_order_acquire) != 0; ++spins) {
    if (spins < 20000) _mm_pause();
    else std::this_thread::yield();
  }
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
}

ThreadPool& ThreadPool::global() {
  auto& pool = global_slot();
  if (!pool) pool = std::make_unique<ThreadPool>(std::max(1u, std::thread::hardware_concurrency()));
  return *pool;
}

void ThreadPool::set_global_threads(int threads) { global_slot() = std::make_unique<ThreadPool>(threads); }

}  // namespace qwenrt
