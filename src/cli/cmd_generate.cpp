#include <cstdio>
#include <sstream>

#include "cli/commands.h"
#include "cli/options.h"
#include "cli/session_options.h"
#include "core/error.h"
#include "engine/greedy_generation.h"
#include "engine/sampled_generation.h"

namespace qwenrt::cli {

namespace {

std::vector<std::vector<int32_t>> read_batch_file(const std::string& path) {
  std::istringstream in(read_input_file(path, "--batch-file"));
  std::vector<std::vector<int32_t>> prompts;
  std::string line;
  int lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    if (line.find_first_not_of(" \r\t") == std::string::npos) continue;
    prompts.push_back(parse_id_list(line, path + ":" + std::to_string(lineno)));
  }
  if (prompts.empty()) fail(path, ": batch file holds no prompts");
  return prompts;
}

std::string ids_json(const std::vector<int32_t>& ids) {
  std::string s = "[";
  for (std::size_t i = 0; i < ids.size(); ++i) s += (i ? ", " : "") + std::to_string(ids[i]);
  return s + "]";
}

}  // namespace

int run_generate(const Args& args) {
  Options opt("generate", {"model", "tokens", "batch-file", "max-tokens", "temperature", "stop-ids", "prefill-chunk", "speculative", "draft-tokens"},
              {"json", kDeterministicFlag});
  opt.parse(args);
  apply_process_options(opt);
  if (opt.has("tokens") == opt.has("batch-file")) fail("generate: give exactly one of --tokens and --batch-file");
  if (opt.number_or("temperature", 0.0, 0.0, 1e6) != 0.0) fail("generate: only greedy decoding (--temperature 0) is available in this build");
  std::vector<std::vector<int32_t>> prompts =
      opt.has("tokens") ? std::vector<std::vector<int32_t>>{parse_id_list(opt.str("tokens"), "--tokens")} : read_batch_file(opt.str("batch-file"));
  GenerationOptions gen;
  gen.max_tokens = opt.integer_or("max-tokens", 16, 0, 1 << 24);
  gen.prefill_chunk = opt.integer_or("prefill-chunk", 512, 1, 1 << 30);
  if (opt.has("stop-ids")) gen.stop_ids = parse_id_list(opt.str("stop-ids"), "--stop-ids");
  const DeviceSpec device = device_option(opt);
  SampledGenerationOptions spec;
  apply_speculation_options(opt, spec);
  auto model = Qwen35Model::load(opt.str("model"));
  model.use_device(device);
  model.set_deterministic(spec.deterministic);
  if (spec.speculative) {
    // One prompt at a time, each drafting with the MTP block; the same tokens as without.
    require_mtp(model, opt.str("model"));
    spec.sampling.temperature = 0.0f;
    spec.max_tokens = gen.max_tokens;
    spec.stop_ids = gen.stop_ids;
    spec.prefill_chunk = gen.prefill_chunk;
    for (const auto& prompt : prompts) {
      ModelCache cache = model.new_cache(1);
      std::vector<int32_t> ids;
      const GenerationStats st = generate_sampled(
          model, cache, cache.acquire(), prompt, spec,
          [&](const SampledToken& t) {
            ids.push_back(t.id);
            return true;
          },
          ThreadPool::global());
      const SpeculationStats& s = st.speculation;
      if (opt.flag("json"))
        std::printf("{\"tokens\": %s, \"steps\": %lld, \"drafted\": %lld, \"accepted\": %lld}\n", ids_json(ids).c_str(),
                    static_cast<long long>(s.steps), static_cast<long long>(s.drafted), static_cast<long long>(s.accepted));
      else std::printf("%s\n", ids_json(ids).c_str());
    }
    return 0;
  }
  const auto outputs = generate_greedy(model, prompts, gen, ThreadPool::global());
  for (const auto& ids : outputs) {
    if (opt.flag("json")) std::printf("{\"tokens\": %s}\n", ids_json(ids).c_str());
    else std::printf("%s\n", ids_json(ids).c_str());
  }
  return 0;
}

}  // namespace qwenrt::cli
