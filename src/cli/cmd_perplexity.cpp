// qwenrt perplexity: a text file tokenized with the checkpoint's tokenizer (as plain text: special
// tokens are not recognised) and scored in consecutive windows (engine/perplexity.h).
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/options.h"
#include "engine/perplexity.h"
#include "text/tokenizer/tokenizer.h"

namespace qwenrt::cli {

int run_perplexity(const Args& args) {
  Options opt("perplexity", {"model", "file", "ctx", "prefill-chunk"}, {"json"}, {{"-f", "file"}});
  opt.parse(args);
  apply_process_options(opt);
  const std::string dir = opt.str("model");
  const std::string text = read_input_file(opt.str("file"), "-f");
  require_utf8(text, "-f " + opt.str("file"));
  const DeviceSpec device = device_option(opt);
  const auto tokenizer = text::Tokenizer::load(dir);
  const std::vector<int32_t> tokens = tokenizer.encode(text, false);
  auto model = Qwen35Model::load(dir);
  model.use_device(device);
  const int64_t max_ctx = model.config().max_position_embeddings > 0 ? model.config().max_position_embeddings : int64_t{1} << 20;
  const int64_t ctx = opt.integer_or("ctx", std::min<int64_t>(512, max_ctx), 2, max_ctx);
  const int64_t chunk = opt.integer_or("prefill-chunk", std::min<int64_t>(ctx, 512), 1, 1 << 20);
  const PerplexityResult r = perplexity(model, tokens, ctx, chunk, ThreadPool::global());
  const double tps = r.seconds > 0 ? static_cast<double>(r.tokens) / r.seconds : 0.0;
  if (opt.flag("json")) {
    nlohmann::json j = {{"perplexity", r.perplexity}, {"nll_per_token", r.nll / static_cast<double>(r.tokens_scored)},
                        {"tokens", r.tokens},         {"tokens_scored", r.tokens_scored},
                        {"windows", r.windows},       {"ctx", ctx},
                        {"seconds", r.seconds},       {"tokens_per_second", tps}};
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf("perplexity %.4f over %lld tokens (%lld scored, %lld windows of %lld), %.1f tokens/s\n", r.perplexity,
                static_cast<long long>(r.tokens), static_cast<long long>(r.tokens_scored), static_cast<long long>(r.windows),
                static_cast<long long>(ctx), tps);
  }
  return 0;
}

}  // namespace qwenrt::cli
