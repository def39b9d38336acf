// qwenrt: the command-line front end. Subcommands live in cmd_*.cpp.
#include <cstdio>
#include <cstring>
#include <exception>
#include <new>
#include <string>

#include "cli/commands.h"
#include "core/error.h"

namespace {

const char* kUsage =
    "usage: qwenrt <command> [options]\n"
    "commands:\n"
    "  logits    --model DIR --tokens 1,2,3 --out FILE.npy [--prefill-chunk N]\n"
    "  generate  --model DIR (--tokens 1,2,3 | --batch-file FILE) --max-tokens N [--temperature 0]\n"
    "            [--stop-ids A,B] [--prefill-chunk N] [--json]\n"
    "  info      --model DIR [--json] [--check]  (--check: NaN/Inf scan of every weight, exit 1 if any)\n"
    "  bench     (--model DIR | --synthetic NAME) [--prompt-tokens P] [--gen-tokens G] [--batch B] [--json]\n"
    "  tokenize  --model DIR                    (text on stdin, JSON ids on stdout)\n"
    "  template  --model DIR --request FILE.json (prints the rendered prompt)\n"
    "  run       --model DIR (-p TEXT | -f FILE) [--system S] [--no-think] [--max-tokens N] [--json]\n"
    "            [--temperature T] [--top-k K] [--top-p P] [--min-p P] [--repeat-penalty R]\n"
    "            [--presence-penalty X] [--frequency-penalty X] [--seed S]\n"
    "  chat      --model DIR [same sampling options] [--system S] [--no-think]\n"
    "  serve     [--model DIR] [--device cpu|cuda[:N]] [--host 127.0.0.1] [--port 8080] [--api-key KEY]\n"
    "            [--max-seqs N] [--ctx-size N] [--max-queue N]  (OpenAI and Anthropic HTTP APIs)\n"
    "            [--kv-bytes N] [--cache-bytes N] [--snapshot-interval N]  (KV pool, prefix cache; docs/server.md)\n"
    "            [--speculative mtp [--draft-tokens K] [--spec-max-seqs N]]  (MTP drafts while <= N decode; CPU)\n"
    "            [--mixed-steps on|off]  (decode rows inside prompt windows; default on with cuda)\n"
    "  quantize  --model DIR --out DIR [--bits B] [--group-size G] [--recipe mixed_2_6|mixed_3_4|mixed_3_6|mixed_4_6]\n"
    "            (an MLX affine checkpoint, as mlx-lm's convert --quantize writes it)\n"
    "  perplexity --model DIR -f FILE [--ctx N] [--json]  (windows of N tokens, default 512; tokens/s)\n"
    "every command takes --threads N (default: the hardware threads; at most 4x those and 1024)\n"
    "and --int8-activations (CPU: products over 4- and 8-bit weights with activations rounded to 8 bits\n"
    "per 32, as llama.cpp does; faster, not exact: docs/quantization.md)\n";

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0) {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  const std::string command = argv[1];
  qwenrt::cli::Args args(argv + 2, argv + argc);
  try {
    if (command == "logits") return qwenrt::cli::run_logits(args);
    if (command == "generate") return qwenrt::cli::run_generate(args);
    if (command == "info") return qwenrt::cli::run_info(args);
    if (command == "bench") return qwenrt::cli::run_bench(args);
    if (command == "tokenize") return qwenrt::cli::run_tokenize(args);
    if (command == "template") return qwenrt::cli::run_template(args);
    if (command == "run") return qwenrt::cli::run_run(args);
    if (command == "chat") return qwenrt::cli::run_chat(args);
    if (command == "serve") return qwenrt::cli::run_serve(args);
    if (command == "quantize") return qwenrt::cli::run_quantize(args);
    if (command == "perplexity") return qwenrt::cli::run_perplexity(args);
    std::fprintf(stderr, "qwenrt: unknown command '%s'\n%s", command.c_str(), kUsage);
    return 2;
  } catch (const qwenrt::Error& e) {
    std::fprintf(stderr, "qwenrt %s: error: %s\n", command.c_str(), e.what());
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "qwenrt %s: error: out of memory\n", command.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "qwenrt %s: internal error: %s\n", command.c_str(), e.what());
  }
  return 1;
}
