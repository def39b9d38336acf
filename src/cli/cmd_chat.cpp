// qwenrt chat: an interactive conversation with history, line editing (libedit when built with
// it), and /reset, /set, /quit.
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <sstream>

#include "cli/commands.h"
#include "cli/options.h"
#include "cli/session_options.h"
#include "core/error.h"
#include "engine/text_session.h"
#include "text/unicode/unicode_utf8.h"

#ifdef QWENRT_HAVE_LIBEDIT
#include <editline/readline.h>
#endif

namespace qwenrt::cli {

namespace {

std::optional<std::string> read_line(const char* prompt, bool interactive) {
#ifdef QWENRT_HAVE_LIBEDIT
  if (interactive) {
    char* line = readline(prompt);
    if (!line) return std::nullopt;
    std::string s(line);
    std::free(line);
    if (!s.empty()) add_history(s.c_str());
    return s;
  }
#endif
  if (interactive) std::fputs(prompt, stdout), std::fflush(stdout);
  std::string s;
  if (!std::getline(std::cin, s)) return std::nullopt;
  return s;
}

const char* kHelp =
    "commands: /reset (forget the conversation), /set NAME VALUE (temperature, top-k, top-p, min-p,\n"
    "          repeat-penalty, presence-penalty, frequency-penalty, seed, max-tokens, think on|off,\n"
    "          system TEXT), /quit\n";

}  // namespace

int run_chat(const Args& args) {
  std::set<std::string> valued = {"model", "system", "max-tokens", "prefill-chunk"};
  for (const auto& n : sampling_option_names()) valued.insert(n);
  for (const auto& n : speculation_option_names()) valued.insert(n);
  Options opt("chat", valued, {"no-think", kDeterministicFlag}, {{"-m", "model"}, {"-n", "max-tokens"}});
  opt.parse(args);
  apply_process_options(opt);
  const bool interactive = isatty(0) && isatty(1);
  const DeviceSpec device = device_option(opt);
  SampledGenerationOptions gen;
  apply_speculation_options(opt, gen);
  const std::string model_dir = resolve_model_dir(opt);
  TextSession session(model_dir, true, device);
  if (gen.speculative) require_mtp(session.model(), model_dir);
  gen.sampling = session.default_sampling();
  apply_sampling_options(opt, gen.sampling);
  gen.max_tokens = opt.integer_or("max-tokens", 1024, 1, 1 << 24);
  gen.prefill_chunk = opt.integer_or("prefill-chunk", 512, 1, 1 << 20);
  bool think = !opt.flag("no-think");
  std::string system = opt.str_or("system", "");
  require_utf8(system, "chat: the system prompt (--system)");
  nlohmann::ordered_json history = nlohmann::ordered_json::array();
  std::fprintf(stderr, "%s", kHelp);

  while (auto line = read_line(">>> ", interactive)) {
    std::string text = *line;
    if (text.empty()) continue;
    if (text[0] == '/') {
      std::istringstream in(text.substr(1));
      std::string cmd, name, value;
      in >> cmd >> name;
      std::getline(in >> std::ws, value);
      try {
        if (cmd == "quit" || cmd == "exit") break;
        if (cmd == "reset") {
          history = nlohmann::ordered_json::array();
          std::fprintf(stderr, "conversation cleared\n");
        } else if (cmd == "set" && name == "think") {
          think = value == "on" || value == "true" || value == "1";
        } else if (cmd == "set" && name == "system") {
          require_utf8(value, "/set system: the system prompt");
          system = value;
        } else if (cmd == "set" && name == "max-tokens") {
          Options o("/set", {"max-tokens"}, {});
          o.parse({"--max-tokens", value});
          gen.max_tokens = o.integer_or("max-tokens", gen.max_tokens, 1, 1 << 24);
        } else if (cmd == "set" && !name.empty()) {
          std::set<std::string> names(sampling_option_names().begin(), sampling_option_names().end());
          Options o("/set", names, {});
          o.parse({"--" + name, value});
          SamplingParams p = gen.sampling;
          apply_sampling_options(o, p);
          gen.sampling = p;
        } else {
          std::fprintf(stderr, "%s", kHelp);
        }
      } catch (const Error& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
      }
      continue;
    }
    if (const auto bad = text::utf8::find_invalid(text)) {
      std::fprintf(stderr, "error: the input line is not valid UTF-8 (ill-formed sequence at byte %zu); ignored\n", *bad);
      continue;
    }
    nlohmann::ordered_json messages = nlohmann::ordered_json::array();
    if (!system.empty()) messages.push_back({{"role", "system"}, {"content", system}});
    for (const auto& m : history) messages.push_back(m);
    messages.push_back({{"role", "user"}, {"content", text}});
    try {
      TurnResult r = session.turn(
          messages, think, gen, [](const std::string& s) { std::fwrite(s.data(), 1, s.size(), stdout), std::fflush(stdout); },
          [&](const std::string& s) { std::fprintf(stderr, "%s%s%s", interactive ? "\x1b[2m" : "", s.c_str(), interactive ? "\x1b[0m" : ""); });
      std::printf("\n");
      std::fprintf(stderr, "[%lld tokens, %.1f tok/s; prompt %lld tokens at %.1f tok/s]\n", static_cast<long long>(r.stats.generated_tokens),
                   r.stats.decode_s > 0 ? r.stats.generated_tokens / r.stats.decode_s : 0.0, static_cast<long long>(r.stats.prompt_tokens),
                   r.stats.prefill_s > 0 ? r.stats.prompt_tokens / r.stats.prefill_s : 0.0);
      history.push_back({{"role", "user"}, {"content", text}});
      nlohmann::ordered_json reply = {{"role", "assistant"}, {"content", r.content}};
      if (!r.reasoning.empty()) reply["reasoning_content"] = r.reasoning;
      history.push_back(reply);
    } catch (const Error& e) {
      std::fprintf(stderr, "error: %s\n", e.what());
    }
  }
  return 0;
}

}  // namespace qwenrt::cli
