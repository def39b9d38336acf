#include "server/metrics.h"

#include <cstdio>

namespace qwenrt::server {

void StatusCounter::add(int status) { ++counts_[static_cast<std::size_t>(status >= 100 && status < 600 ? status : 599)]; }

int64_t StatusCounter::count(int status) const { return status >= 0 && status < 600 ? counts_[static_cast<std::size_t>(status)].load() : 0; }

std::vector<std::pair<int, int64_t>> StatusCounter::seen() const {
  std::vector<std::pair<int, int64_t>> out;
  for (int s = 100; s < 600; ++s)
    if (int64_t n = counts_[static_cast<std::size_t>(s)].load()) out.emplace_back(s, n);
  return out;
}

namespace {

std::string number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

struct Writer {
  std::string out;
  void head(const char* name, const char* type, const char* help) {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
  }
  void metric(const char* name, const char* type, const char* help, double value) {
    head(name, type, help);
    out += std::string(name) + " " + number(value) + "\n";
  }
  void histogram(const char* name, const char* help, const LatencyHistogram& h) {
    head(name, "histogram", help);
    int64_t cumulative = 0;
    for (std::size_t i = 0; i < LatencyHistogram::kBounds.size(); ++i) {
      cumulative += h.counts[i];
      out += std::string(name) + "_bucket{le=\"" + number(LatencyHistogram::kBounds[i]) + "\"} " + std::to_string(cumulative) + "\n";
    }
    out += std::string(name) + "_bucket{le=\"+Inf\"} " + std::to_string(h.count) + "\n";
    out += std::string(name) + "_sum " + number(h.sum) + "\n" + name + "_count " + std::to_string(h.count) + "\n";
  }
};

}  // namespace

std::string render_metrics(const SchedulerStats& s, const StatusCounter& statuses, int http_in_flight) {
  Writer w;
  w.head("qwenrt_http_responses_total", "counter", "HTTP responses by status code.");
  for (const auto& [status, n] : statuses.seen())
    w.out += "qwenrt_http_responses_total{code=\"" + std::to_string(status) + "\"} " + std::to_string(n) + "\n";
  w.metric("qwenrt_http_in_flight", "gauge", "Generation requests being answered.", http_in_flight);
  w.metric("qwenrt_requests_total", "counter", "Requests accepted by the scheduler.", static_cast<double>(s.requests));
  w.head("qwenrt_sequences_finished_total", "counter", "Sequences (choices) finished, by reason.");
  const char* reasons[] = {"stop", "length", "stop_string", "tool_calls", "cancelled", "error"};
  for (std::size_t i = 0; i < s.finished.size(); ++i)
    w.out += std::string("qwenrt_sequences_finished_total{reason=\"") + reasons[i] + "\"} " + std::to_string(s.finished[i]) + "\n";
  w.metric("qwenrt_step_failures_total", "counter", "Model steps that failed (their sequences ended with an error).",
           static_cast<double>(s.failed_steps));
  w.metric("qwenrt_requests_waiting", "gauge", "Requests waiting for room (the queue).", s.waiting);
  w.metric("qwenrt_requests_running", "gauge", "Sequences (choices) in state slots.", s.running);
  w.metric("qwenrt_free_slots", "gauge", "State slots free.", s.free_slots);
  w.metric("qwenrt_prompt_tokens_total", "counter", "Prompt tokens admitted.", static_cast<double>(s.prompt_tokens));
  w.metric("qwenrt_prefill_tokens_total", "counter", "Prompt tokens computed (admitted less those from the prefix cache).",
           static_cast<double>(s.prefill_tokens));
  w.metric("qwenrt_cached_prompt_tokens_total", "counter", "Prompt tokens resumed from the prefix cache.", static_cast<double>(s.cached_tokens));
  w.metric("qwenrt_generation_tokens_total", "counter", "Tokens generated.", static_cast<double>(s.generated_tokens));
  w.metric("qwenrt_steps_total", "counter", "Scheduler iterations.", static_cast<double>(s.steps));
  const std::pair<const char*, const SchedulerStats::StepTime*> kinds[] = {{"decode", &s.decode_steps}, {"window", &s.window_steps}};
  w.head("qwenrt_model_steps_total", "counter", "Model steps by kind (decode: decode and draft-verify steps; window: prompt chunks, with the decode rows in mixed steps).");
  for (const auto& [kind, t] : kinds) w.out += std::string("qwenrt_model_steps_total{kind=\"") + kind + "\"} " + std::to_string(t->steps) + "\n";
  w.head("qwenrt_model_step_rows_total", "counter", "Token rows the model steps computed, by kind.");
  for (const auto& [kind, t] : kinds) w.out += std::string("qwenrt_model_step_rows_total{kind=\"") + kind + "\"} " + std::to_string(t->rows) + "\n";
  w.head("qwenrt_model_step_seconds_total", "counter", "Time in model steps (start to results on the host), by kind.");
  for (const auto& [kind, t] : kinds) w.out += std::string("qwenrt_model_step_seconds_total{kind=\"") + kind + "\"} " + number(t->seconds) + "\n";
  w.metric("qwenrt_mixed_steps_total", "counter", "Window steps that carried the decode rows too (serve --mixed-steps).",
           static_cast<double>(s.mixed_steps));
  w.metric("qwenrt_prefix_cache_snapshot_seconds_total", "counter", "Time taking prefix-cache snapshots.", s.snapshot_seconds);
  w.metric("qwenrt_scheduler_busy_seconds_total", "counter", "Time in scheduler iterations that had work (steps, admission, sampling, streaming).",
           s.busy_seconds);
  w.histogram("qwenrt_time_to_first_token_seconds", "From submission to a sequence's first token.", s.time_to_first_token);
  w.histogram("qwenrt_inter_token_latency_seconds", "Between a sequence's consecutive tokens.", s.inter_token_latency);
  w.metric("qwenrt_kv_blocks_total", "gauge", "KV blocks in the pool.", static_cast<double>(s.kv_blocks));
  w.metric("qwenrt_kv_blocks_used", "gauge", "KV blocks held (by sequences or the prefix cache).", static_cast<double>(s.kv_blocks_used));
  w.metric("qwenrt_kv_bytes_used", "gauge", "Bytes of the KV blocks held.",
           static_cast<double>(s.kv_blocks_used) * static_cast<double>(s.kv_bytes_per_block));
  w.metric("qwenrt_state_bytes_used", "gauge", "Bytes of DeltaNet state in the slots in use.",
           static_cast<double>(s.running) * static_cast<double>(s.state_bytes_per_slot));
  w.metric("qwenrt_prefix_cache_hits_total", "counter", "Admitted requests that resumed from a cached prefix.", static_cast<double>(s.prefix.hits));
  w.metric("qwenrt_prefix_cache_misses_total", "counter", "Admitted requests that found no cached prefix.", static_cast<double>(s.prefix.misses));
  w.metric("qwenrt_prefix_cache_entries", "gauge", "Snapshots in the prefix cache.", static_cast<double>(s.prefix.entries));
  w.metric("qwenrt_prefix_cache_bytes", "gauge", "Bytes the prefix cache holds (snapshots, tokens and KV blocks).",
           static_cast<double>(s.prefix.bytes));
  w.metric("qwenrt_prefix_cache_state_bytes", "gauge", "Bytes of DeltaNet snapshots (and their tokens) in the prefix cache.",
           static_cast<double>(s.prefix.state_bytes));
  w.metric("qwenrt_prefix_cache_evictions_total", "counter", "Prefix-cache entries evicted.", static_cast<double>(s.prefix.evictions));
  w.metric("qwenrt_spec_draft_tokens_total", "counter", "MTP draft tokens verified (serve --speculative mtp).", static_cast<double>(s.spec_drafted));
  w.metric("qwenrt_spec_accepted_tokens_total", "counter", "MTP draft tokens accepted (each equal to the token the model itself picked there).",
           static_cast<double>(s.spec_accepted));
  w.metric("qwenrt_spec_rounds_total", "counter", "Sequence steps that verified MTP drafts.", static_cast<double>(s.spec_rounds));
  w.metric("qwenrt_spec_accepted_per_round", "gauge", "Mean draft tokens accepted per sequence step that verified drafts (since start).",
           s.spec_rounds > 0 ? static_cast<double>(s.spec_accepted) / static_cast<double>(s.spec_rounds) : 0.0);
  return w.out;
}

}  // namespace qwenrt::server
