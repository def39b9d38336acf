#include "backend/cuda/diagnostics/stream_profiler.h"

#include <algorithm>
#include <cstdio>

#include "backend/cuda/runtime/cuda_check.h"

namespace qwenrt::cuda {

StreamProfiler::~StreamProfiler() {
  for (auto* list : {&open_, &done_})
    for (const Mark& m : *list) {
      cudaEventDestroy(m.start);
      cudaEventDestroy(m.stop);
    }
  for (cudaEvent_t e : free_) cudaEventDestroy(e);
}

cudaEvent_t StreamProfiler::event() {
  if (!free_.empty()) {
    cudaEvent_t e = free_.back();
    free_.pop_back();
    return e;
  }
  cudaEvent_t e;
  QWENRT_CUDA_CHECK(cudaEventCreate(&e));
  return e;
}

void StreamProfiler::begin(const char* part, cudaStream_t stream, const char* detail) {
  if (!enabled_) return;
  Mark m{detail ? std::string(part) + detail : std::string(part), event(), event()};
  QWENRT_CUDA_CHECK(cudaEventRecord(m.start, stream));
  open_.push_back(m);
}

void StreamProfiler::end(cudaStream_t stream) {
  if (!enabled_ || open_.empty()) return;
  Mark m = open_.back();
  open_.pop_back();
  QWENRT_CUDA_CHECK(cudaEventRecord(m.stop, stream));
  done_.push_back(m);
}

void StreamProfiler::collect() {
  for (const Mark& m : done_) {
    float ms = 0;
    QWENRT_CUDA_CHECK(cudaEventElapsedTime(&ms, m.start, m.stop));
    Total& t = totals_[m.part];
    t.ms += ms;
    ++t.calls;
    free_.push_back(m.start);
    free_.push_back(m.stop);
  }
  done_.clear();
}

std::string StreamProfiler::report() const {
  std::vector<const std::pair<const std::string, Total>*> rows;
  double sum = 0;
  for (const auto& entry : totals_) {
    rows.push_back(&entry);
    sum += entry.second.ms;
  }
  std::sort(rows.begin(), rows.end(), [](const auto* a, const auto* b) { return a->second.ms > b->second.ms; });
  std::string out;
  char line[200];
  for (const auto* row : rows) {
    const auto& [part, t] = *row;
    std::snprintf(line, sizeof line, "  %-36s %10.2f ms  %5.1f%%  %7ld calls  %9.1f us/call\n", part.c_str(), t.ms,
                  sum > 0 ? 100.0 * t.ms / sum : 0.0, t.calls, t.calls ? 1000.0 * t.ms / static_cast<double>(t.calls) : 0.0);
    out += line;
  }
  return out;
}

}  // namespace qwenrt::cuda
