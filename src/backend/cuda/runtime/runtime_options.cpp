// The CUDA backend's run-time switches (runtime_options.h): parsed once from the environment.
#include "backend/cuda/runtime/runtime_options.h"

#include <cstdlib>

#include "core/error.h"

namespace qwenrt::cuda {
namespace {

// A 0|1 switch: unset or empty keeps `fallback`.
bool parse_flag(const std::function<const char*(const char*)>& lookup, const char* name, bool fallback) {
  const char* v = lookup(name);
  if (!v || !*v) return fallback;
  const std::string s(v);
  if (s == "1") return true;
  if (s == "0") return false;
  fail(name, "=", s, " is not a valid value; it takes 0 or 1");
}

RuntimeOptions& current() {
  static RuntimeOptions options = parse_runtime_options([](const char* name) -> const char* { return std::getenv(name); });
  return options;
}

}  // namespace

std::vector<std::pair<std::string, std::string>> RuntimeOptions::describe() const {
  auto flag = [](bool b) { return std::string(b ? "1" : "0"); };
  return {{"graphs", flag(graphs)},           {"pdl", flag(pdl)},
          {"prefetch_l2", flag(prefetch_l2)}, {"profile", flag(profile)},
          {"launch_trace", launch_trace},     {"state_wgmma", flag(state_wgmma)}, {"moe_wgmma", flag(moe_wgmma)}};
}

RuntimeOptions parse_runtime_options(const std::function<const char*(const char*)>& lookup) {
  RuntimeOptions o;
  o.graphs = parse_flag(lookup, "QWENRT_CUDA_GRAPHS", o.graphs);
  o.pdl = parse_flag(lookup, "QWENRT_CUDA_PDL", o.pdl);
  o.prefetch_l2 = parse_flag(lookup, "QWENRT_CUDA_PREFETCH_L2", o.prefetch_l2);
  o.profile = parse_flag(lookup, "QWENRT_CUDA_PROFILE", o.profile);
  if (const char* v = lookup("QWENRT_CUDA_LAUNCH_TRACE")) o.launch_trace = v;
  o.state_wgmma = parse_flag(lookup, "QWENRT_CUDA_STATE_WGMMA", o.state_wgmma);
  o.moe_wgmma = parse_flag(lookup, "QWENRT_CUDA_MOE_WGMMA", o.moe_wgmma);
  return o;
}

const RuntimeOptions& runtime_options() { return current(); }

ScopedRuntimeOptions::ScopedRuntimeOptions(const RuntimeOptions& options) : saved_(current()) { current() = options; }
ScopedRuntimeOptions::~ScopedRuntimeOptions() { current() = saved_; }

}  // namespace qwenrt::cuda
