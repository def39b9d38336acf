#pragma once
// `qwenrt quantize`: a Hugging Face Qwen 3.5 checkpoint (bf16/f16/f32) rewritten as the MLX affine
// checkpoint mlx-lm's `convert --quantize` would write: mlx-lm's names (language_model.model.*,
// switch_mlp experts), its sanitize (conv1d taps as [C, K, 1], the zero-centred norms stored as
// 1 + w, mtp.* and the vision tower dropped), its casts (to the config's dtype, A_log kept), its
// choice of modules (inputs a multiple of the group size; for MoE the router and shared-expert gate
// at 8 bits g64) and its quantization arithmetic (formats/mlx_affine_quantize.h), so mlx-lm loads and
// runs the result and dequantizes to the same values qwenrt does.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>

#include "core/thread_pool.h"
#include "model/config.h"

namespace qwenrt {

class CheckpointDir;

struct MlxQuantizeOptions {
  int bits = 4;
  int group_size = 64;
  // "" or one of mlx-lm's mixed recipes: mixed_2_6, mixed_3_4, mixed_3_6, mixed_4_6 (low bits for
  // most matrices; high bits for lm_head and, on the "sensitive" layers (first and last eighth,
  // every third between), v_proj and down_proj). The recipe sets the bits; --bits must agree.
  std::string recipe;
};

// Error naming the option when bits, group size or recipe are impossible.
void check_mlx_quantize_options(const MlxQuantizeOptions& options);

// The bits and group size mlx-lm gives the module (mlx name, without ".weight"), or nullopt when it
// stays unquantized (its input width is not a multiple of the group size); `entry` says whether the
// choice is recorded per module in config.json (a recipe's or the MoE predicate's).
struct ModuleQuant {
  AffineSpec spec;
  bool entry = false;
  bool entry_names_mode = false;  // mlx-lm's recipes write "mode": "affine" in the entry, its MoE predicate does not
};
std::optional<ModuleQuant> mlx_module_quant(const std::string& module, int64_t cols, int64_t num_layers, bool moe, const MlxQuantizeOptions& options);

struct MlxExportSummary {
  int64_t tensors = 0, quantized = 0, kept_dense = 0;
  int64_t matrix_parameters = 0;
  std::size_t matrix_bytes = 0;  // packed words + scales + biases of quantized matrices, dense matrices as stored
  std::size_t file_bytes = 0;
};

using ExportProgress = std::function<void(std::size_t done_bytes, std::size_t total_bytes)>;

// Writes out_dir/{model.safetensors, config.json} and copies the tokenizer, template and
// generation files. out_dir must not exist or be empty.
MlxExportSummary export_mlx_affine(const CheckpointDir& input, const ModelConfig& config, const MlxQuantizeOptions& options,
                                   const std::filesystem::path& out_dir, ThreadPool& pool, const ExportProgress& progress);

}  // namespace qwenrt
