#include "core/thread_pool.h"

#include <algorithm>
#include <memory>

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

void ThreadPool::worker_loop(int index) {
  unsigned long seen = 0;
  for (;;) {
    const std::function<void(std::size_t, std::size_t)>* job;
    std::size_t n, grain;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      job = job_;
      n = job_n_;
      grain = job_grain_;
    }
    auto [b, e] = slice(n, grain, size(), index);
    if (b < e) (*job)(b, e);
    {
      std::lock_guard lock(mutex_);
      if (--pending_ == 0) done_.notify_one();
    }
  }
}

void ThreadPool::parallel_for(std::size_t n, std::size_t grain,
                              const std::function<void(std::size_t, std::size_t)>& fn) {
  if (n == 0) return;
  grain = std::max<std::size_t>(grain, 1);
  if (workers_.empty() || n <= grain) {
    fn(0, n);
    return;
  }
  {
    std::lock_guard lock(mutex_);
    job_ = &fn;
    job_n_ = n;
    job_grain_ = grain;
    pending_ = static_cast<int>(workers_.size());
    ++generation_;
  }
  wake_.notify_all();
  auto [b, e] = slice(n, grain, size(), 0);
  if (b < e) fn(b, e);
  std::unique_lock lock(mutex_);
  done_.wait(lock, [&] { return pending_ == 0; });
}

ThreadPool& ThreadPool::global() {
  auto& pool = global_slot();
  if (!pool) pool = std::make_unique<ThreadPool>(std::max(1u, std::thread::hardware_concurrency()));
  return *pool;
}

void ThreadPool::set_global_threads(int threads) {
  global_slot() = std::make_unique<ThreadPool>(threads);
}

}  // namespace qwenrt
