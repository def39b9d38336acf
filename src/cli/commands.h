#pragma once
// One function per subcommand; each takes the arguments after the subcommand name and returns the
// process exit code. Errors are thrown as qwenrt::Error and reported by main.
#include <string>
#include <vector>

#include "backend/device.h"

namespace qwenrt::cli {

using Args = std::vector<std::string>;

int run_logits(const Args& args);
int run_generate(const Args& args);
int run_info(const Args& args);
int run_bench(const Args& args);
int run_tokenize(const Args& args);
int run_template(const Args& args);
int run_run(const Args& args);
int run_chat(const Args& args);
int run_serve(const Args& args);
int run_quantize(const Args& args);
int run_perplexity(const Args& args);

// Applies the options every command takes: --threads (default: all hardware threads) to the
// global pool, --int8-activations to the CPU's quantized products (backend/cpu/mlx_affine_int8.h).
class Options;
inline const char* kInt8ActivationsFlag = "int8-activations";
void apply_process_options(const Options& options);

// --device (default cpu), parsed and checked: Error when the build or the machine cannot run it,
// or when --int8-activations asks for a CPU mode on a GPU.
DeviceSpec device_option(const Options& options);

}  // namespace qwenrt::cli
