#pragma once
// One pool of worker threads for every parallel loop in the process. parallel_for splits [0, n)
// into contiguous ranges, one per thread, so each thread streams its own slice of a weight matrix.
//
// A decode step issues hundreds of short parallel loops, so hand-off latency matters: workers spin
// briefly on an atomic generation counter before sleeping on a condition variable, and the caller
// spins on the pending count.
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace qwenrt {

class ThreadPool {
 public:
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  // Calls fn(begin, end) on disjoint ranges covering [0, n); ranges start at multiples of `grain`.
  // Runs on the caller plus the workers and returns when all are done. An exception from fn is
  // rethrown here once every thread has left the loop (the other ranges still run). Not reentrant.
  void parallel_for(std::size_t n, std::size_t grain, const std::function<void(std::size_t, std::size_t)>& fn);

  // The process-wide pool, sized by set_global_threads (default: hardware concurrency).
  static ThreadPool& global();
  static void set_global_threads(int threads);

 private:
  void worker_loop(int index);
  void run_slice(int index) noexcept;  // this thread's range of the current job

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_;
  const std::function<void(std::size_t, std::size_t)>* job_ = nullptr;
  std::size_t job_n_ = 0, job_grain_ = 1;
  std::exception_ptr error_;  // the current job's first error; guarded by mutex_
  std::atomic<unsigned long> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
};

}  // namespace qwenrt
