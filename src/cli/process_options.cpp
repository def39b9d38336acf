#include <algorithm>
#include <thread>

#include "backend/cpu/mlx_affine_int8.h"
#include "cli/commands.h"
#include "cli/options.h"
#include "core/error.h"
#include "core/thread_pool.h"

namespace qwenrt::cli {

void apply_process_options(const Options& options) {
  cpu::set_int8_activations(options.flag(kInt8ActivationsFlag));
  const int64_t hw = std::max(1u, std::thread::hardware_concurrency());
  const int64_t threads = options.integer_or("threads", hw, 1, kMaxThreads);
  if (threads > kThreadsPerHardwareThread * hw)
    fail(options.command(), ": --threads ", threads, " is more than ", kThreadsPerHardwareThread, "x the ", hw,
         " hardware threads of this machine (at most ", kThreadsPerHardwareThread * hw, ")");
  ThreadPool::set_global_threads(static_cast<int>(threads));
}

DeviceSpec device_option(const Options& options) {
  const DeviceSpec spec = parse_device(options.str_or("device", "cpu"));
  if (spec.kind != DeviceSpec::Kind::Cpu && options.flag(kInt8ActivationsFlag))
    fail(options.command(), ": --", kInt8ActivationsFlag,
         " is a CPU mode (the GPU's products over quantized weights keep the activations in bf16); drop it or use --device cpu");
  require_device(spec);
  return spec;
}

}  // namespace qwenrt::cli
