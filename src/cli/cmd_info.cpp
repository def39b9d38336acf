#include <chrono>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>

#ifdef QWENRT_HAVE_CUDA
#include "backend/cuda/runtime/runtime_options.h"
#endif
#include "cli/commands.h"
#include "cli/options.h"
#include "core/thread_pool.h"
#include "formats/checkpoint_dir.h"
#include "formats/checkpoint_scan.h"
#include "model/config.h"
#include "model/weights.h"

namespace qwenrt::cli {

namespace {

// --check: every floating-point tensor scanned for NaN and Inf; exit 1 when any holds one.
int check_weights(const CheckpointDir& ckpt, bool json) {
  const auto t0 = std::chrono::steady_clock::now();
  const CheckpointScan scan = scan_non_finite(ckpt, ThreadPool::global());
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (json) {
    nlohmann::json j;
    j["ok"] = scan.non_finite.empty();
    j["tensors_scanned"] = scan.tensors_scanned;
    j["values_scanned"] = scan.values_scanned;
    j["skipped_tensors"] = scan.skipped;
    j["non_finite"] = nlohmann::json::array();
    for (const auto& t : scan.non_finite)
      j["non_finite"].push_back({{"tensor", t.name}, {"file", t.file}, {"nan", t.nan}, {"inf", t.inf}, {"first_index", t.first_index}});
    j["seconds"] = seconds;
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    for (const auto& t : scan.non_finite)
      std::printf("%s (%s): %lld NaN, %lld Inf, first at flat index %lld\n", t.name.c_str(), t.file.c_str(), static_cast<long long>(t.nan),
                  static_cast<long long>(t.inf), static_cast<long long>(t.first_index));
    std::printf("%s: %lld tensors (%lld values) scanned in %.2f s, %zu with non-finite values", scan.non_finite.empty() ? "ok" : "FAILED",
                static_cast<long long>(scan.tensors_scanned), static_cast<long long>(scan.values_scanned), seconds, scan.non_finite.size());
    if (!scan.skipped.empty()) std::printf("; %zu tensors of non-float dtypes not scanned", scan.skipped.size());
    std::printf("\n");
  }
  return scan.non_finite.empty() ? 0 : 1;
}

}  // namespace

int run_info(const Args& args) {
  Options opt("info", {"model"}, {"json", "check"});
  opt.parse(args);
  apply_process_options(opt);
  device_option(opt);  // accepted everywhere; this command computes nothing on it
  const std::string dir = opt.str("model");
  CheckpointDir ckpt(dir);
  if (opt.flag("check")) return check_weights(ckpt, opt.flag("json"));
  const ModelConfig c = parse_model_config(ckpt.config(), dir + "/config.json");
  const ModelWeights w = bind_weights(c, ckpt);  // validates every tensor

  std::map<std::string, std::pair<int64_t, std::size_t>> by_dtype;  // dtype → (params, bytes)
  int64_t params = 0, text_params = 0;
  for (const auto& [name, t] : ckpt.tensors()) {
    auto& e = by_dtype[std::string(dtype_name(t->dtype))];
    e.first += t->numel();
    e.second += t->nbytes;
    params += t->numel();
    if (name.rfind("mtp.", 0) != 0 && name.rfind("model.visual.", 0) != 0) text_params += t->numel();
  }
  // Matrix formats (MLX affine per bits and group size), each matrix once (a tied head is the embedding).
  std::map<std::string, std::tuple<int64_t, int64_t, std::size_t>> by_format;  // → (matrices, parameters, bytes)
  auto count = [&](const Weight& m) {
    std::string f(weight_format_name(m.format));
    if (m.format == WeightFormat::MlxAffine) f += " " + std::to_string(m.quant.bits) + "-bit g" + std::to_string(m.quant.group_size);
    if (m.format == WeightFormat::Fp8Block)
      f += " block " + std::to_string(m.fp8.block_rows) + "x" + std::to_string(m.fp8.block_cols) + " " +
           std::string(weight_format_name(m.fp8.scale_format)) + " scales";
    auto& [n, p, b] = by_format[f];
    ++n;
    p += m.rows * m.cols;
    b += m.bytes();
  };
  count(w.embed);
  if (!c.tie_word_embeddings) count(w.lm_head);
  for (const auto& l : w.layers) {
    if (l.kind == LayerKind::FullAttention)
      for (const Weight* m : {&l.attn.q_proj, &l.attn.k_proj, &l.attn.v_proj, &l.attn.o_proj}) count(*m);
    else
      for (const Weight* m : {&l.gdn.in_qkv, &l.gdn.in_z, &l.gdn.in_b, &l.gdn.in_a, &l.gdn.out_proj}) count(*m);
    auto mlp = [&](const MlpWeights& m) {
      count(m.gate);
      count(m.up);
      count(m.down);
    };
    if (l.moe.experts.empty()) {
      mlp(l.mlp);
    } else {
      count(l.moe.router);
      for (const auto& e : l.moe.experts) mlp(e);
      if (l.moe.has_shared) {
        mlp(l.moe.shared);
        count(l.moe.shared_gate);
      }
    }
  }
  int64_t matrix_params = 0;
  std::size_t matrix_bytes = 0;
  for (const auto& [f, e] : by_format) matrix_params += std::get<1>(e), matrix_bytes += std::get<2>(e);
  const double bits_per_weight = matrix_params ? 8.0 * static_cast<double>(matrix_bytes) / static_cast<double>(matrix_params) : 0.0;

  nlohmann::json j;
  j["architecture"] = c.architecture;
  j["model_type"] = c.model_type;
  j["layers"] = c.num_layers;
  j["layer_pattern"] = c.layer_pattern();
  j["linear_attention_layers"] = c.count(LayerKind::LinearAttention);
  j["full_attention_layers"] = c.count(LayerKind::FullAttention);
  j["hidden_size"] = c.hidden_size;
  j["vocab_size"] = c.vocab_size;
  j["attention"] = {
      {"heads", c.num_heads}, {"kv_heads", c.num_kv_heads}, {"head_dim", c.head_dim}, {"rotary_dim", c.rotary_dim}, {"rope_theta", c.rope_theta}};
  j["deltanet"] = {{"key_heads", c.linear_num_key_heads},
                   {"value_heads", c.linear_num_value_heads},
                   {"key_head_dim", c.linear_key_head_dim},
                   {"value_head_dim", c.linear_value_head_dim},
                   {"conv_kernel", c.linear_conv_kernel}};
  if (c.moe)
    j["moe"] = {{"experts", c.num_experts},
                {"experts_per_token", c.experts_per_token},
                {"expert_intermediate_size", c.moe_intermediate_size},
                {"shared_expert_intermediate_size", c.shared_expert_intermediate_size}};
  else j["intermediate_size"] = c.intermediate_size;
  j["tie_word_embeddings"] = c.tie_word_embeddings;
  j["parameters"] = params;
  j["text_parameters"] = text_params;
  j["mtp_tensors"] = w.mtp_tensors.size();
  j["files"] = ckpt.file_count();
  for (const auto& [dt, e] : by_dtype) j["dtypes"][dt] = {{"parameters", e.first}, {"bytes", e.second}};
  for (const auto& [f, e] : by_format)
    j["weight_formats"][f] = {{"matrices", std::get<0>(e)}, {"parameters", std::get<1>(e)}, {"bytes", std::get<2>(e)}};
  j["matrix_bits_per_weight"] = bits_per_weight;
#ifdef QWENRT_HAVE_CUDA
  // The CUDA backend's switches as this process reads them (QWENRT_CUDA_*, docs/cuda.md).
  std::string cuda_options;
  for (const auto& [name, value] : cuda::runtime_options().describe()) {
    j["cuda_options"][name] = value;
    cuda_options += (cuda_options.empty() ? "" : " ") + name + "=" + value;
  }
#endif

  if (opt.flag("json")) {
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  std::printf("architecture   %s (%s)\n", c.architecture.c_str(), c.model_type.c_str());
  std::printf("layers         %lld: %s (L = Gated DeltaNet, A = gated attention)\n", static_cast<long long>(c.num_layers), c.layer_pattern().c_str());
  std::printf("hidden         %lld, vocab %lld, %s embeddings\n", static_cast<long long>(c.hidden_size), static_cast<long long>(c.vocab_size),
              c.tie_word_embeddings ? "tied" : "untied");
  std::printf("attention      %lld q / %lld kv heads of %lld, rotary %lld, theta %g\n", static_cast<long long>(c.num_heads),
              static_cast<long long>(c.num_kv_heads), static_cast<long long>(c.head_dim), static_cast<long long>(c.rotary_dim), c.rope_theta);
  std::printf("deltanet       %lld key / %lld value heads, dk %lld, dv %lld, conv %lld\n", static_cast<long long>(c.linear_num_key_heads),
              static_cast<long long>(c.linear_num_value_heads), static_cast<long long>(c.linear_key_head_dim),
              static_cast<long long>(c.linear_value_head_dim), static_cast<long long>(c.linear_conv_kernel));
  if (c.moe)
    std::printf("moe            %lld experts, top %lld, width %lld, shared %lld\n", static_cast<long long>(c.num_experts),
                static_cast<long long>(c.experts_per_token), static_cast<long long>(c.moe_intermediate_size),
                static_cast<long long>(c.shared_expert_intermediate_size));
  else std::printf("mlp            %lld\n", static_cast<long long>(c.intermediate_size));
  std::printf("parameters     %lld (text model %lld; %zu MTP tensors)\n", static_cast<long long>(params), static_cast<long long>(text_params),
              w.mtp_tensors.size());
  for (const auto& [dt, e] : by_dtype)
    std::printf("  %-6s       %lld parameters, %.3f MB\n", dt.c_str(), static_cast<long long>(e.first), e.second / 1e6);
  std::printf("matrices       %.3f bits per weight (scales and biases included)\n", bits_per_weight);
  for (const auto& [f, e] : by_format)
    std::printf("  %-20s %lld matrices, %lld parameters, %.3f MB\n", f.c_str(), static_cast<long long>(std::get<0>(e)),
                static_cast<long long>(std::get<1>(e)), static_cast<double>(std::get<2>(e)) / 1e6);
#ifdef QWENRT_HAVE_CUDA
  std::printf("cuda options   %s\n", cuda_options.c_str());
#endif
  return 0;
}

}  // namespace qwenrt::cli
