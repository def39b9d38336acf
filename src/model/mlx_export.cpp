#include "model/mlx_export.h"

#include <algorithm>
#include <map>
#include <vector>

#include "backend/weight.h"
#include "core/error.h"
#include "core/half.h"
#include "formats/checkpoint_dir.h"
#include "formats/mlx_affine_quantize.h"
#include "formats/safetensors_writer.h"

namespace qwenrt {

namespace fs = std::filesystem;

namespace {

struct Recipe {
  const char* name;
  int low, high;
};
constexpr Recipe kRecipes[] = {{"mixed_2_6", 2, 6}, {"mixed_3_4", 3, 4}, {"mixed_3_6", 3, 6}, {"mixed_4_6", 4, 6}};

const Recipe* find_recipe(const std::string& name) {
  for (const auto& r : kRecipes)
    if (name == r.name) return &r;
  return nullptr;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}
bool contains(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

// mlx-lm's recipes read the layer index at the position of the first numeric path component of a
// down_proj (language_model.model.layers.N.…: position 3); a shorter path counts as layer 0.
int64_t layer_index(const std::string& module) {
  std::size_t start = 0;
  for (int part = 0; part < 3; ++part) {
    start = module.find('.', start);
    if (start == std::string::npos) return 0;
    ++start;
  }
  const std::size_t end = module.find('.', start);
  const std::string token = module.substr(start, end == std::string::npos ? std::string::npos : end - start);
  if (token.empty() || !std::all_of(token.begin(), token.end(), [](char ch) { return ch >= '0' && ch <= '9'; })) return 0;
  return std::stoll(token);
}

// A source tensor's rows (its elements viewed as [numel / cols, cols]).
struct RowRange {
  const TensorInfo* t;
  int64_t first, count;
};

// One tensor of the output, with where its values come from.
struct Planned {
  std::string name;  // mlx-lm's name
  std::vector<int64_t> shape;
  DType dtype;  // storage dtype (of the values, or of a quantized matrix's scales and biases)
  std::vector<RowRange> rows;
  int64_t cols = 0;
  bool add_one = false;  // a zero-centred norm, stored as 1 + w
  bool matrix = false;   // a projection or embedding (mlx-lm's Linear, Embedding, SwitchLinear)
  std::optional<ModuleQuant> quant;
};

Planned planned(std::string name, std::vector<int64_t> shape, DType dtype, std::vector<RowRange> rows, int64_t cols) {
  Planned p;
  p.name = std::move(name);
  p.shape = std::move(shape);
  p.dtype = dtype;
  p.rows = std::move(rows);
  p.cols = cols;
  return p;
}

float round_to(DType t, float v) {
  switch (t) {
    case DType::BF16: return bf16_to_f32(f32_to_bf16(v));
    case DType::F16: return f16_to_f32(f32_to_f16(v));
    default: return v;
  }
}

void store(DType t, float v, std::byte* out) {
  if (t == DType::F32) {
    std::memcpy(out, &v, 4);
    return;
  }
  const uint16_t h = t == DType::BF16 ? f32_to_bf16(v) : f32_to_f16(v);
  std::memcpy(out, &h, 2);
}

void read_row(const RowRange& r, int64_t i, int64_t cols, float* out) {
  const int64_t rows = r.t->numel() / cols;
  Weight view{weight_format_of(r.t->dtype), rows, cols, r.t->data};
  view.row_to_f32(r.first + i, out);
}

// mlx-lm's convert casts to "torch_dtype" (top level) or text_config's "dtype" when it is one of these.
std::optional<DType> conversion_dtype(const nlohmann::json& config) {
  std::string name;
  if (auto it = config.find("torch_dtype"); it != config.end() && it->is_string()) name = it->get<std::string>();
  else if (auto tc = config.find("text_config"); tc != config.end() && tc->is_object())
    if (auto d = tc->find("dtype"); d != tc->end() && d->is_string()) name = d->get<std::string>();
  if (name == "bfloat16") return DType::BF16;
  if (name == "float16") return DType::F16;
  if (name == "float32") return DType::F32;
  return std::nullopt;
}

const char* kNormSuffixes[] = {".input_layernorm.weight", ".post_attention_layernorm.weight", "model.norm.weight", ".q_norm.weight",
                               ".k_norm.weight"};

}  // namespace

void check_mlx_quantize_options(const MlxQuantizeOptions& o) {
  check_affine_params(o.bits, o.group_size, "qwenrt quantize");
  if (o.recipe.empty()) return;
  const Recipe* r = find_recipe(o.recipe);
  if (!r) fail("qwenrt quantize: unknown --recipe '", o.recipe, "' (mixed_2_6, mixed_3_4, mixed_3_6 or mixed_4_6)");
  if (o.bits != r->low)
    fail("qwenrt quantize: --recipe ", o.recipe, " quantizes at ", r->low, " and ", r->high, " bits; --bits ", o.bits,
         " disagrees (leave --bits out or give ", r->low, ")");
}

std::optional<ModuleQuant> mlx_module_quant(const std::string& module, int64_t cols, int64_t num_layers, bool moe, const MlxQuantizeOptions& o) {
  if (cols % o.group_size != 0) return std::nullopt;  // mlx-lm leaves these unquantized
  if (!o.recipe.empty()) {
    const Recipe* r = find_recipe(o.recipe);
    const int64_t i = layer_index(module), eighth = num_layers / 8;
    const bool more = i < eighth || i >= 7 * num_layers / 8 || (((i - eighth) % 3) + 3) % 3 == 2;
    const bool high = ((contains(module, "v_proj") || contains(module, "v_a_proj") || contains(module, "v_b_proj")) && more) ||
                      (contains(module, "down_proj") && more) || contains(module, "lm_head");
    return ModuleQuant{{high ? r->high : r->low, o.group_size}, true, true};
  }
  if (moe && (ends_with(module, "mlp.gate") || ends_with(module, "shared_expert_gate"))) {
    if (cols % 64 != 0) fail("qwenrt quantize: '", module, "' has ", cols, " inputs, not a multiple of 64 (mlx-lm quantizes it at 8 bits g64)");
    return ModuleQuant{{8, 64}, true, false};
  }
  return ModuleQuant{{o.bits, o.group_size}, false};
}

MlxExportSummary export_mlx_affine(const CheckpointDir& in, const ModelConfig& c, const MlxQuantizeOptions& o, const fs::path& out_dir,
                                   ThreadPool& pool, const ExportProgress& progress) {
  check_mlx_quantize_options(o);
  if (c.quantization.present || c.quantization.fp8.present)
    fail(in.dir().string(), ": the checkpoint is already quantized; qwenrt quantize reads bf16/f16/f32 checkpoints");
  if (fs::exists(out_dir) && (!fs::is_directory(out_dir) || !fs::is_empty(out_dir)))
    fail(out_dir.string(), ": exists and is not an empty folder (qwenrt quantize does not overwrite)");
  if (fs::exists(out_dir) && fs::equivalent(out_dir, in.dir())) fail(out_dir.string(), ": is the input folder");

  const std::optional<DType> cast = conversion_dtype(in.config());
  bool unsanitized_conv = false;
  for (const auto& [name, t] : in.tensors()) {
    if (name.rfind("language_model.", 0) == 0)
      fail(in.dir().string(), ": tensor '", name, "' is named as mlx-lm writes it; give qwenrt quantize the Hugging Face checkpoint");
    if (ends_with(name, "conv1d.weight") && !t->shape.empty() && t->shape.back() != 1) unsanitized_conv = true;
  }

  std::vector<Planned> plan;
  // Per-expert matrices stacked into switch_mlp: prefix → projection → expert → tensor.
  std::map<std::string, std::map<std::string, std::map<int64_t, const TensorInfo*>>> experts;
  auto mlx_name = [](const std::string& hf) {
    if (hf == "lm_head.weight") return std::string("language_model.lm_head.weight");
    if (hf.rfind("model.language_model.", 0) == 0) return "language_model.model." + hf.substr(21);
    if (hf.rfind("model.", 0) == 0) return "language_model.model." + hf.substr(6);
    fail("qwenrt quantize: tensor '", hf, "' is outside the text model (model.*, model.language_model.*, lm_head)");
  };
  auto add_matrix = [&](const std::string& name, std::vector<int64_t> shape, DType dtype, std::vector<RowRange> rows) {
    Planned p = planned(name, shape, dtype, std::move(rows), shape.back());
    p.matrix = true;
    const std::string module = ends_with(name, ".weight") ? name.substr(0, name.size() - 7) : name;
    p.quant = mlx_module_quant(module, p.cols, c.num_layers, c.moe, o);
    plan.push_back(std::move(p));
  };
  for (const auto& [name, t] : in.tensors()) {
    if (name.rfind("mtp.", 0) == 0 || name.rfind("model.visual.", 0) == 0) continue;  // mlx-lm drops both
    if (t->dtype != DType::BF16 && t->dtype != DType::F16 && t->dtype != DType::F32)
      fail(t->file, ": tensor '", name, "' has dtype ", dtype_name(t->dtype), "; qwenrt quantize reads bf16/f16/f32 checkpoints");
    const DType dtype = ends_with(name, "A_log") ? t->dtype : cast.value_or(t->dtype);  // mlx-lm's cast_predicate keeps A_log
    const std::string out = mlx_name(name);
    if (ends_with(name, "mlp.experts.gate_up_proj") && t->shape.size() == 3) {
      const int64_t E = t->shape[0], I = t->shape[1] / 2, H = t->shape[2];
      const std::string prefix = out.substr(0, out.size() - std::string("experts.gate_up_proj").size()) + "switch_mlp.";
      std::vector<RowRange> gate, up;
      for (int64_t e = 0; e < E; ++e) {
        gate.push_back({t, e * 2 * I, I});
        up.push_back({t, e * 2 * I + I, I});
      }
      add_matrix(prefix + "gate_proj.weight", {E, I, H}, dtype, gate);
      add_matrix(prefix + "up_proj.weight", {E, I, H}, dtype, up);
      continue;
    }
    if (ends_with(name, "mlp.experts.down_proj") && t->shape.size() == 3) {
      const std::string prefix = out.substr(0, out.size() - std::string("experts.down_proj").size()) + "switch_mlp.";
      add_matrix(prefix + "down_proj.weight", t->shape, dtype, {{t, 0, t->shape[0] * t->shape[1]}});
      continue;
    }
    if (const auto at = name.find(".mlp.experts."); at != std::string::npos && ends_with(name, "_proj.weight") && t->shape.size() == 2) {
      const std::string rest = name.substr(at + 13);  // "{e}.{proj}.weight"
      const std::size_t dot = rest.find('.');
      experts[out.substr(0, out.find(".mlp.experts.") + 5)][rest.substr(dot + 1, rest.size() - dot - 8)][std::stoll(rest.substr(0, dot))] = t;
      continue;
    }
    if (ends_with(name, "conv1d.weight")) {
      // [C, 1, K] (or [C, K]) → mlx-lm's [C, K, 1]: the same values in the same order.
      const int64_t C = t->shape.front(), K = t->numel() / std::max<int64_t>(1, C);
      plan.push_back(planned(out, {C, K, 1}, dtype, {{t, 0, 1}}, t->numel()));
      continue;
    }
    if (t->shape.size() >= 2) {
      add_matrix(out, t->shape, dtype, {{t, 0, t->numel() / t->shape.back()}});
      continue;
    }
    Planned p = planned(out, t->shape, dtype, {{t, 0, 1}}, t->numel());
    const std::string& vector_name = name;  // a lambda cannot capture a structured binding in clang 14
    p.add_one = unsanitized_conv && t->shape.size() == 1 &&
                std::any_of(std::begin(kNormSuffixes), std::end(kNormSuffixes), [&](const char* s) { return ends_with(vector_name, s); });
    plan.push_back(std::move(p));
  }
  for (const auto& [prefix, projs] : experts)
    for (const auto& [proj, by_expert] : projs) {
      const int64_t E = static_cast<int64_t>(by_expert.size());
      std::vector<RowRange> rows;
      for (int64_t e = 0; e < E; ++e) {
        auto it = by_expert.find(e);
        if (it == by_expert.end()) fail(in.dir().string(), ": expert ", e, " of '", prefix, "experts.*.", proj, "' is missing");
        if (it->second->shape != by_expert.begin()->second->shape)
          fail(it->second->file, ": tensor '", it->second->name, "' differs in shape from expert 0");
        rows.push_back({it->second, 0, it->second->shape[0]});
      }
      const TensorInfo* t0 = by_expert.begin()->second;
      add_matrix(prefix + "switch_mlp." + proj + ".weight", {E, t0->shape[0], t0->shape[1]}, cast.value_or(t0->dtype), rows);
    }

  // config.json as mlx-lm's save_config writes it: the input config, vision_config dropped, the
  // quantization parameters (and per-module entries) as "quantization" and "quantization_config".
  nlohmann::json config = in.config();
  config.erase("vision_config");
  config.erase("_name_or_path");
  if (!config.contains("text_config"))
    if (auto mt = config.find("model_type"); mt != config.end() && mt->is_string() && ends_with(mt->get<std::string>(), "_text"))
      *mt = mt->get<std::string>().substr(0, mt->get<std::string>().size() - 5);  // mlx-lm knows qwen3_5 / qwen3_5_moe
  nlohmann::json quant = {{"group_size", o.group_size}, {"bits", o.bits}, {"mode", "affine"}};
  for (const auto& p : plan)
    if (p.quant && p.quant->entry) {
      nlohmann::json e = {{"group_size", p.quant->spec.group_size}, {"bits", p.quant->spec.bits}};
      if (p.quant->entry_names_mode) e["mode"] = "affine";
      quant[p.name.substr(0, p.name.size() - 7)] = e;
    }
  config["quantization"] = quant;
  config["quantization_config"] = quant;

  fs::create_directories(out_dir);
  SafetensorsWriter writer(out_dir / "model.safetensors", {{"format", "mlx"}});
  std::size_t total = 0;
  for (const auto& p : plan) {
    for (const auto& r : p.rows) total += static_cast<std::size_t>(r.count * p.cols) * dtype_size(r.t->dtype);
    if (!p.quant) {
      writer.declare(p.name, p.dtype, p.shape);
      continue;
    }
    const std::string module = p.name.substr(0, p.name.size() - 7);
    std::vector<int64_t> words = p.shape, groups = p.shape;
    words.back() = p.cols * p.quant->spec.bits / 32;
    groups.back() = p.cols / p.quant->spec.group_size;
    writer.declare(p.name, DType::U32, words);
    writer.declare(module + ".scales", p.dtype, groups);
    writer.declare(module + ".biases", p.dtype, groups);
  }

  MlxExportSummary summary;
  std::size_t done = 0;
  const std::size_t chunk_rows = 256;
  for (const auto& p : plan) {
    ++summary.tensors;
    const std::size_t esize = dtype_size(p.dtype);
    // Rows in chunks (a vector or the conv taps are one row), cast to the storage dtype (a
    // zero-centred norm gets its 1 + w first, in its stored dtype, as mlx-lm's sanitize adds it),
    // quantized or stored as they are.
    const int64_t cols = p.cols;
    std::vector<std::byte> scales, biases;
    const int bits = p.quant ? p.quant->spec.bits : 0, gs = p.quant ? p.quant->spec.group_size : 0;
    const std::size_t out_row = p.quant ? static_cast<std::size_t>(cols * bits / 8) : static_cast<std::size_t>(cols) * esize;
    const std::size_t group_row = p.quant ? static_cast<std::size_t>(cols / gs) * esize : 0;
    int64_t all_rows = 0;
    for (const auto& r : p.rows) all_rows += r.count;
    if (p.quant) {
      scales.resize(static_cast<std::size_t>(all_rows) * group_row);
      biases.resize(scales.size());
    }
    int64_t row_at = 0;  // rows of this tensor written before range r
    for (const auto& r : p.rows) {
      for (int64_t b = 0; b < r.count; b += static_cast<int64_t>(chunk_rows)) {
        const int64_t n = std::min<int64_t>(static_cast<int64_t>(chunk_rows), r.count - b);
        std::vector<std::byte> out(static_cast<std::size_t>(n) * out_row);
        pool.parallel_for(static_cast<std::size_t>(n), 8, [&](std::size_t lo, std::size_t hi) {
          std::vector<float> row(static_cast<std::size_t>(cols));
          for (std::size_t i = lo; i < hi; ++i) {
            read_row(r, b + static_cast<int64_t>(i), cols, row.data());
            for (float& x : row) x = round_to(p.dtype, p.add_one ? round_to(r.t->dtype, x + 1.0f) : x);
            std::byte* dst = out.data() + i * out_row;
            if (!p.quant) {
              for (int64_t j = 0; j < cols; ++j) store(p.dtype, row[static_cast<std::size_t>(j)], dst + static_cast<std::size_t>(j) * esize);
              continue;
            }
            const std::size_t g = static_cast<std::size_t>(row_at + b) + i;
            mlx_affine_quantize_row(row.data(), cols, bits, gs, p.dtype, reinterpret_cast<uint8_t*>(dst), scales.data() + g * group_row,
                                    biases.data() + g * group_row);
          }
        });
        writer.write(p.name, out);
        done += static_cast<std::size_t>(n * cols) * dtype_size(r.t->dtype);
        if (progress) progress(done, total);
      }
      row_at += r.count;
    }
    if (p.matrix) summary.matrix_parameters += all_rows * cols;
    if (p.quant) {
      writer.write(p.name.substr(0, p.name.size() - 7) + ".scales", scales);
      writer.write(p.name.substr(0, p.name.size() - 7) + ".biases", biases);
      ++summary.quantized;
      summary.matrix_bytes += static_cast<std::size_t>(all_rows) * (out_row + 2 * group_row);
    } else if (p.matrix) {
      ++summary.kept_dense;
      summary.matrix_bytes += static_cast<std::size_t>(all_rows) * out_row;
    }
  }
  writer.finish();
  summary.file_bytes = writer.data_bytes();

  {
    const fs::path tmp = out_dir / "config.json.partial";
    std::FILE* f = std::fopen(tmp.c_str(), "wb");
    if (!f) fail(tmp.string(), ": cannot create");
    const std::string text = config.dump(4) + "\n";
    const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
    std::fclose(f);
    if (!ok) fail(tmp.string(), ": write failed");
    fs::rename(tmp, out_dir / "config.json");
  }
  for (const char* file : {"tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "chat_template.json", "generation_config.json",
                           "special_tokens_map.json", "vocab.json", "merges.txt", "added_tokens.json"})
    if (fs::is_regular_file(in.dir() / file)) fs::copy_file(in.dir() / file, out_dir / file);
  return summary;
}

}  // namespace qwenrt
