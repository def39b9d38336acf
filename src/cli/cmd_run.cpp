// qwenrt run: one prompt through the chat template, the completion streamed to stdout.
#include <unistd.h>

#include <cstdio>

#include "cli/commands.h"
#include "cli/options.h"
#include "cli/session_options.h"
#include "core/error.h"
#include "engine/text_session.h"

namespace qwenrt::cli {

namespace {
std::set<std::string> with_sampling(std::set<std::string> names) {
  for (const auto& n : sampling_option_names()) names.insert(n);
  for (const auto& n : speculation_option_names()) names.insert(n);
  return names;
}
}  // namespace

int run_run(const Args& args) {
  Options opt("run", with_sampling({"model", "prompt", "file", "system", "max-tokens", "prefill-chunk"}), {"no-think", "json", kDeterministicFlag},
              {{"-p", "prompt"}, {"-f", "file"}, {"-m", "model"}, {"-n", "max-tokens"}});
  opt.parse(args);
  apply_process_options(opt);
  if (opt.has("prompt") == opt.has("file")) fail("run: give exactly one of -p TEXT and -f FILE");
  std::string prompt;
  if (opt.has("prompt")) {
    prompt = opt.str("prompt");
    require_utf8(prompt, "run: the prompt (-p)");
  } else {
    prompt = read_input_file(opt.str("file"), "run: -f");
    require_utf8(prompt, "run: the prompt file " + opt.str("file"));
  }
  if (opt.has("system")) require_utf8(opt.str("system"), "run: the system prompt (--system)");
  const bool json = opt.flag("json");
  const DeviceSpec device = device_option(opt);
  SampledGenerationOptions gen;
  apply_speculation_options(opt, gen);
  const std::string model_dir = resolve_model_dir(opt);
  TextSession session(model_dir, !json && isatty(2), device);
  if (gen.speculative) require_mtp(session.model(), model_dir);
  gen.sampling = session.default_sampling();
  apply_sampling_options(opt, gen.sampling);
  gen.max_tokens = opt.integer_or("max-tokens", 512, 1, 1 << 24);
  gen.prefill_chunk = opt.integer_or("prefill-chunk", 512, 1, 1 << 20);

  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  if (opt.has("system")) messages.push_back({{"role", "system"}, {"content", opt.str("system")}});
  messages.push_back({{"role", "user"}, {"content", prompt}});

  const bool dim = isatty(2);
  auto on_content = [&](const std::string& s) {
    if (json) return;
    std::fwrite(s.data(), 1, s.size(), stdout);
    std::fflush(stdout);
  };
  auto on_reasoning = [&](const std::string& s) {  // reasoning to stderr, dimmed on a terminal
    if (json) return;
    std::fprintf(stderr, "%s%s%s", dim ? "\x1b[2m" : "", s.c_str(), dim ? "\x1b[0m" : "");
  };
  const TurnResult r = session.turn(messages, !opt.flag("no-think"), gen, on_content, on_reasoning);
  if (json) {
    nlohmann::ordered_json out = {{"text", r.content},
                                  {"reasoning", r.reasoning},
                                  {"tool_calls", r.tool_calls},
                                  {"tokens", r.tokens},
                                  {"finish_reason", r.stats.finish == GenerationStats::Finish::Length ? "length" : "stop"},
                                  {"timings",
                                   {{"prompt_tokens", r.stats.prompt_tokens},
                                    {"generated_tokens", r.stats.generated_tokens},
                                    {"prefill_s", r.stats.prefill_s},
                                    {"decode_s", r.stats.decode_s},
                                    {"prefill_tok_s", r.stats.prefill_s > 0 ? r.stats.prompt_tokens / r.stats.prefill_s : 0.0},
                                    {"decode_tok_s", r.stats.decode_s > 0 ? r.stats.generated_tokens / r.stats.decode_s : 0.0}}}};
    if (r.stats.speculative)
      out["speculation"] = {{"steps", r.stats.speculation.steps},
                            {"drafted", r.stats.speculation.drafted},
                            {"accepted", r.stats.speculation.accepted},
                            {"accepted_per_position", r.stats.speculation.accepted_at},
                            {"drafted_per_position", r.stats.speculation.drafted_at}};
    std::printf("%s\n", out.dump().c_str());
  } else {
    std::printf("\n");
    if (!r.tool_calls.empty()) std::printf("[tool calls] %s\n", r.tool_calls.dump().c_str());
  }
  return 0;
}

}  // namespace qwenrt::cli
