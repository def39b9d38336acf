#include <cstdio>

#include "cli/commands.h"
#include "cli/options.h"
#include "engine/greedy_generation.h"
#include "formats/npy.h"

namespace qwenrt::cli {

int run_logits(const Args& args) {
  Options opt("logits", {"model", "tokens", "out", "prefill-chunk"}, {});
  opt.parse(args);
  apply_process_options(opt);
  const auto tokens = parse_id_list(opt.str("tokens"), "--tokens");
  const std::string out = opt.str("out");
  const DeviceSpec device = device_option(opt);
  auto model = Qwen35Model::load(opt.str("model"));
  model.use_device(device);
  const int64_t chunk = opt.integer_or("prefill-chunk", static_cast<int64_t>(tokens.size()), 1, 1 << 30);
  const auto logits = prompt_logits(model, tokens, chunk, ThreadPool::global());
  const int64_t shape[] = {static_cast<int64_t>(tokens.size()), model.config().vocab_size};
  write_npy_f32(out, shape, logits);
  return 0;
}

}  // namespace qwenrt::cli
