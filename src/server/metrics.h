#pragma once
// GET /metrics: the scheduler's counters, gauges and latency histograms and the HTTP answers by
// status, in the Prometheus text format (version 0.0.4).
#include <array>
#include <atomic>
#include <cstdint>
#include <string>

#include "engine/scheduler.h"

namespace qwenrt::server {

// HTTP answers by status code (1xx-5xx; others land in 5xx), counted as each response is sent.
class StatusCounter {
 public:
  void add(int status);
  int64_t count(int status) const;
  // (status, count) for every status seen so far.
  std::vector<std::pair<int, int64_t>> seen() const;

 private:
  std::array<std::atomic<int64_t>, 600> counts_{};
};

std::string render_metrics(const SchedulerStats& stats, const StatusCounter& statuses, int http_in_flight);

}  // namespace qwenrt::server
