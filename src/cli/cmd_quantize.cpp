// qwenrt quantize: a Hugging Face checkpoint to an MLX affine one (model/mlx_export.h), with a
// progress bar on stderr.
#include <unistd.h>

#include <chrono>
#include <cstdio>

#include "cli/commands.h"
#include "cli/options.h"
#include "formats/checkpoint_dir.h"
#include "model/config.h"
#include "model/mlx_export.h"
#include "model/weights.h"

namespace qwenrt::cli {

int run_quantize(const Args& args) {
  Options opt("quantize", {"model", "out", "bits", "group-size", "recipe"}, {});
  opt.parse(args);
  apply_process_options(opt);
  MlxQuantizeOptions q;
  q.recipe = opt.str_or("recipe", "");
  // A recipe sets the low bits itself; --bits defaults to them (4 without a recipe).
  const int64_t default_bits = q.recipe == "mixed_2_6" ? 2 : (q.recipe == "mixed_3_4" || q.recipe == "mixed_3_6") ? 3 : 4;
  q.bits = static_cast<int>(opt.integer_or("bits", default_bits, 1, 64));
  q.group_size = static_cast<int>(opt.integer_or("group-size", 64, 1, 1 << 20));
  check_mlx_quantize_options(q);
  const std::string in_dir = opt.str("model"), out_dir = opt.str("out");
  CheckpointDir ckpt(in_dir);
  const ModelConfig c = parse_model_config(ckpt.config(), in_dir + "/config.json");
  bind_weights(c, ckpt);  // the input must be a whole, valid checkpoint before anything is written

  const bool tty = isatty(STDERR_FILENO) != 0;
  const auto t0 = std::chrono::steady_clock::now();
  int last = -1;
  auto progress = [&](std::size_t done, std::size_t total) {
    const int pct = total ? static_cast<int>(100.0 * static_cast<double>(done) / static_cast<double>(total)) : 100;
    if (pct == last || (!tty && pct != 100 && pct % 10 != 0)) return;  // a line per 10% when stderr is a file
    last = pct;
    const int width = 40, fill = pct * width / 100;
    std::fprintf(stderr, "%squantize [%.*s%*s] %3d%% %.0f / %.0f MB", tty ? "\r" : "", fill, "########################################", width - fill,
                 "", pct, static_cast<double>(done) / 1e6, static_cast<double>(total) / 1e6);
    if (!tty || pct == 100) std::fputc('\n', stderr);
    std::fflush(stderr);
  };
  const MlxExportSummary s = export_mlx_affine(ckpt, c, q, out_dir, ThreadPool::global(), progress);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("%s: %lld tensors, %lld matrices quantized (%d-bit g%d%s%s), %lld kept dense; %.3f bits per weight; %.1f MB in %.1f s\n",
              out_dir.c_str(), static_cast<long long>(s.tensors), static_cast<long long>(s.quantized), q.bits, q.group_size,
              q.recipe.empty() ? "" : ", recipe ", q.recipe.c_str(), static_cast<long long>(s.kept_dense),
              s.matrix_parameters ? 8.0 * static_cast<double>(s.matrix_bytes) / static_cast<double>(s.matrix_parameters) : 0.0,
              static_cast<double>(s.file_bytes) / 1e6, seconds);
  return 0;
}

}  // namespace qwenrt::cli
