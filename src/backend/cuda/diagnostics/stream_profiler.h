#pragma once
// GPU time per named part of the work on a stream, for finding where a step's time goes: events
// around each part, summed when collected after the stream has been synchronised. Off unless
// enabled; it does nothing then. Not for use inside graph capture.
#include <cuda_runtime_api.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace qwenrt::cuda {

class StreamProfiler {
 public:
  explicit StreamProfiler(bool enabled) : enabled_(enabled) {}
  ~StreamProfiler();
  StreamProfiler(const StreamProfiler&) = delete;
  StreamProfiler& operator=(const StreamProfiler&) = delete;

  bool enabled() const { return enabled_; }
  // Marks the start and end of a part on `stream`; the part's name is `part` followed by `detail`
  // (if given), e.g. "in_proj" " (cuBLAS)".
  void begin(const char* part, cudaStream_t stream, const char* detail = nullptr);
  void end(cudaStream_t stream);
  // After the stream has been synchronised: adds the marked intervals to the totals.
  void collect();
  // "part: ms, share, calls, us per call" lines, largest first.
  std::string report() const;

  // begin() in the constructor, end() in the destructor.
  class Scope {
   public:
    Scope(StreamProfiler& p, const char* part, cudaStream_t s, const char* detail = nullptr) : p_(p), s_(s) { p_.begin(part, s_, detail); }
    ~Scope() { p_.end(s_); }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    StreamProfiler& p_;
    cudaStream_t s_;
  };

 private:
  cudaEvent_t event();
  bool enabled_;
  std::vector<cudaEvent_t> free_;
  struct Mark {
    std::string part;
    cudaEvent_t start, stop;
  };
  struct Total {
    double ms = 0;
    long calls = 0;
  };
  std::vector<Mark> open_, done_;
  std::map<std::string, Total> totals_;
};

}  // namespace qwenrt::cuda
