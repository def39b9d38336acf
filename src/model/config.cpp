#include "model/config.h"

#include <cmath>
#include <optional>

#include "backend/weight.h"
#include "core/error.h"

namespace qwenrt {

namespace {

using nlohmann::json;

// Reads fields of one JSON object, naming the file and field in every error.
class FieldReader {
 public:
  FieldReader(const json& obj, std::string source) : obj_(obj), source_(std::move(source)) {}

  const json* find(const char* key) const {
    auto it = obj_.find(key);
    return it == obj_.end() || it->is_null() ? nullptr : &*it;
  }
  int64_t integer(const char* key, int64_t lo, int64_t hi) const {
    const json* v = find(key);
    if (!v) fail(source_, ": missing field '", key, "'");
    return check_int(*v, key, lo, hi);
  }
  int64_t integer_or(const char* key, int64_t fallback, int64_t lo, int64_t hi) const {
    const json* v = find(key);
    return v ? check_int(*v, key, lo, hi) : fallback;
  }
  double number_or(const char* key, double fallback, double lo, double hi) const {
    const json* v = find(key);
    if (!v) return fallback;
    if (!v->is_number()) fail(source_, ": field '", key, "' must be a number");
    double d = v->get<double>();
    if (!(d >= lo && d <= hi)) fail(source_, ": field '", key, "' = ", d, " is outside [", lo, ", ", hi, "]");
    return d;
  }
  const std::string& source() const { return source_; }

 private:
  int64_t check_int(const json& v, const char* key, int64_t lo, int64_t hi) const {
    if (!v.is_number_integer()) fail(source_, ": field '", key, "' must be an integer");
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(hi))
      fail(source_, ": field '", key, "' = ", v.get<uint64_t>(), " is outside [", lo, ", ", hi, "]");
    int64_t i = v.get<int64_t>();
    if (i < lo || i > hi) fail(source_, ": field '", key, "' = ", i, " is outside [", lo, ", ", hi, "]");
    return i;
  }
  const json& obj_;
  std::string source_;
};

std::optional<bool> bool_field(const json& obj, const char* key, const std::string& source) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return std::nullopt;
  if (!it->is_boolean()) fail(source, ": field '", key, "' must be true or false");
  return it->get<bool>();
}

std::string string_field(const json& obj, const char* key, const std::string& fallback, const std::string& source) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return fallback;
  if (!it->is_string()) fail(source, ": field '", key, "' must be a string");
  return it->get<std::string>();
}

void read_layer_types(const json& text, const FieldReader& f, ModelConfig& c) {
  if (const json* lt = f.find("layer_types")) {
    if (!lt->is_array()) fail(f.source(), ": 'layer_types' must be an array");
    if (static_cast<int64_t>(lt->size()) != c.num_layers)
      fail(f.source(), ": 'layer_types' has ", lt->size(), " entries but num_hidden_layers is ", c.num_layers);
    for (const auto& t : *lt) {
      std::string s = t.is_string() ? t.get<std::string>() : "";
      if (s == "linear_attention") c.layer_types.push_back(LayerKind::LinearAttention);
      else if (s == "full_attention") c.layer_types.push_back(LayerKind::FullAttention);
      else fail(f.source(), ": 'layer_types' entry ", t.dump(), " is neither \"linear_attention\" nor \"full_attention\"");
    }
    return;
  }
  int64_t interval = f.integer_or("full_attention_interval", 4, 1, 1 << 20);
  for (int64_t i = 0; i < c.num_layers; ++i) c.layer_types.push_back((i + 1) % interval == 0 ? LayerKind::FullAttention : LayerKind::LinearAttention);
}

AffineSpec read_affine_spec(const json& obj, const AffineSpec& defaults, const std::string& what) {
  AffineSpec spec = defaults;
  const std::string mode = string_field(obj, "mode", "affine", what);
  if (mode != "affine") fail(what, ": quantization mode '", mode, "' is not supported (only MLX \"affine\" quantization loads for now)");
  FieldReader f(obj, what);
  spec.bits = static_cast<int>(f.integer_or("bits", defaults.bits, 0, 64));
  spec.group_size = static_cast<int>(f.integer_or("group_size", defaults.group_size, 0, 1 << 20));
  check_affine_params(spec.bits, spec.group_size, what);
  return spec;
}

Fp8Config read_fp8(const json& obj, const std::string& what) {
  Fp8Config f;
  f.present = true;
  f.source = what;
  const std::string fmt = string_field(obj, "fmt", "e4m3", what);
  if (fmt != "e4m3") fail(what, ": fp8 fmt '", fmt, "' is not supported (only e4m3 weights load)");
  const std::string scheme = string_field(obj, "activation_scheme", "dynamic", what);
  if (scheme != "dynamic") fail(what, ": activation_scheme '", scheme, "' is not supported (\"dynamic\" only: static input scales are not read)");
  if (auto b = obj.find("weight_block_size"); b != obj.end()) {
    if (b->is_null()) fail(what, ": weight_block_size null (one scale per tensor) is not supported; block FP8 needs [rows, cols]");
    if (!b->is_array() || b->size() != 2 || !(*b)[0].is_number_integer() || !(*b)[1].is_number_integer())
      fail(what, ": weight_block_size must be [rows, cols], two integers");
    const int64_t br = (*b)[0].get<int64_t>(), bc = (*b)[1].get<int64_t>();
    if (br < 1 || br > 65536 || bc < 8 || bc > 65536 || bc % 8 != 0)
      fail(what, ": weight_block_size [", br, ", ", bc, "] is not supported (rows 1..65536, columns a multiple of 8 up to 65536)");
    f.block_rows = static_cast<int>(br);
    f.block_cols = static_cast<int>(bc);
  }
  if (auto m = obj.find("modules_to_not_convert"); m != obj.end() && !m->is_null()) {
    if (!m->is_array()) fail(what, ": modules_to_not_convert must be an array of module names");
    for (const auto& e : *m) {
      if (!e.is_string()) fail(what, ": modules_to_not_convert entry ", e.dump(), " is not a string");
      f.modules_to_not_convert.push_back(e.get<std::string>());
    }
  }
  return f;
}

// "quantization" (MLX) at the top level or in text_config; else "quantization_config" when it is
// MLX's copy of the same dict (no quant_method); other methods are named in an error.
QuantizationConfig read_quantization(const json& root, const json* text, const std::string& source) {
  QuantizationConfig q;
  const json* found = nullptr;
  std::string key;
  for (const json* obj : {&root, text})
    for (const char* k : {"quantization", "quantization_config"}) {
      if (found || !obj) continue;
      auto it = obj->find(k);
      if (it == obj->end() || it->is_null()) continue;
      found = &*it;
      key = std::string(obj == &root ? "" : "text_config.") + k;
    }
  // "quantization" wins over "quantization_config" wherever each is.
  for (const json* obj : {&root, text}) {
    if (!obj) continue;
    auto it = obj->find("quantization");
    if (it != obj->end() && !it->is_null()) {
      found = &*it;
      key = std::string(obj == &root ? "" : "text_config.") + "quantization";
      break;
    }
  }
  if (!found) return q;
  const std::string what = source + " " + key;
  if (!found->is_object()) fail(what, ": must be an object");
  if (auto m = found->find("quant_method"); m != found->end() && !found->contains("bits")) {
    if (*m == "fp8") {
      q.fp8 = read_fp8(*found, what);
      return q;
    }
    fail(what, ": quant_method ", m->dump(), " is not supported (MLX affine quantization and quant_method \"fp8\" load)");
  }
  q.present = true;
  q.source = what;
  q.defaults = read_affine_spec(*found, AffineSpec{}, what);
  for (const auto& [name, value] : found->items()) {
    if (name == "bits" || name == "group_size" || name == "mode" || name == "quant_method") continue;
    if (value.is_boolean()) {
      if (value.get<bool>()) q.modules[name] = q.defaults;
      else q.modules[name] = std::nullopt;
    } else if (value.is_object()) {
      q.modules[name] = read_affine_spec(value, q.defaults, what + " entry '" + name + "'");
    } else {
      fail(what, ": entry '", name, "' must be an object of quantization parameters or false");
    }
  }
  return q;
}

}  // namespace

bool Fp8Config::not_converted(const std::string& module) const {
  for (const auto& p : modules_to_not_convert) {
    if (p.empty()) continue;
    if (module.rfind(p, 0) == 0 && (module.size() == p.size() || module[p.size()] == '.')) return true;
    if (module.size() >= p.size() && module.compare(module.size() - p.size(), p.size(), p) == 0) return true;
  }
  return false;
}

AffineSpec QuantizationConfig::spec_for(const std::string& module) const {
  if (!present) fail("'", module, ".scales' is present but config.json has no \"quantization\" (bits, group_size) for MLX affine weights");
  auto it = modules.find(module);
  if (it == modules.end()) return defaults;
  if (!it->second) fail(source, " says module '", module, "' is not quantized (false), but the checkpoint has '", module, ".scales'");
  return *it->second;
}

int64_t ModelConfig::count(LayerKind kind) const {
  int64_t n = 0;
  for (auto k : layer_types) n += k == kind;
  return n;
}

std::string ModelConfig::layer_pattern() const {
  std::string s;
  for (std::size_t i = 0; i < layer_types.size(); ++i) {
    if (i && i % 4 == 0) s += ' ';
    s += layer_types[i] == LayerKind::FullAttention ? 'A' : 'L';
  }
  return s;
}

ModelConfig parse_model_config(const json& root, const std::string& source) {
  if (!root.is_object()) fail(source, ": config must be a JSON object");
  ModelConfig c;
  auto arch = root.find("architectures");
  if (arch != root.end() && arch->is_array() && !arch->empty() && (*arch)[0].is_string()) c.architecture = (*arch)[0].get<std::string>();
  std::string top_type = string_field(root, "model_type", "", source);

  const json* text = &root;
  auto tc = root.find("text_config");
  if (tc != root.end() && !tc->is_null()) {
    if (!tc->is_object()) fail(source, ": 'text_config' must be an object");
    text = &*tc;
    c.nested = true;
  }
  c.model_type = string_field(*text, "model_type", top_type, source);
  static const char* kKnown[] = {"qwen3_5", "qwen3_5_text", "qwen3_5_moe", "qwen3_5_moe_text"};
  bool known = false;
  for (const char* k : kKnown) known |= c.model_type == k;
  if (!known) fail(source, ": model_type '", c.model_type, "' is not supported (expected qwen3_5, qwen3_5_text, qwen3_5_moe or qwen3_5_moe_text)");
  if (!c.architecture.empty()) {
    static const char* kArch[] = {"Qwen3_5ForConditionalGeneration", "Qwen3_5ForCausalLM", "Qwen3_5MoeForConditionalGeneration",
                                  "Qwen3_5MoeForCausalLM"};
    bool ok = false;
    for (const char* a : kArch) ok |= c.architecture == a;
    if (!ok) fail(source, ": architecture '", c.architecture, "' is not supported");
  } else {
    c.architecture = c.model_type.find("moe") != std::string::npos ? (c.nested ? "Qwen3_5MoeForConditionalGeneration" : "Qwen3_5MoeForCausalLM")
                                                                   : (c.nested ? "Qwen3_5ForConditionalGeneration" : "Qwen3_5ForCausalLM");
  }
  c.moe = c.model_type.find("moe") != std::string::npos;

  FieldReader f(*text, source + (c.nested ? " (text_config)" : ""));
  c.vocab_size = f.integer("vocab_size", 1, 1 << 24);
  c.hidden_size = f.integer("hidden_size", 1, 1 << 16);
  c.num_layers = f.integer("num_hidden_layers", 1, 1024);
  c.rms_norm_eps = f.number_or("rms_norm_eps", 1e-6, 0.0, 1.0);
  c.num_heads = f.integer("num_attention_heads", 1, 1024);
  c.num_kv_heads = f.integer("num_key_value_heads", 1, 1024);
  if (c.num_heads % c.num_kv_heads != 0)
    fail(f.source(), ": num_attention_heads (", c.num_heads, ") must be a multiple of num_key_value_heads (", c.num_kv_heads, ")");
  c.head_dim = f.integer_or("head_dim", c.hidden_size / c.num_heads, 1, 4096);
  if (c.head_dim < 2) fail(f.source(), ": head_dim ", c.head_dim, " is too small");

  // Rotary: rope_parameters (current HF) or top-level fields (older configs).
  const json* rope = f.find("rope_parameters");
  if (!rope) rope = f.find("rope_scaling");
  double theta = f.number_or("rope_theta", 10000.0, 1.0, 1e12);
  double partial = f.number_or("partial_rotary_factor", 0.25, 0.0, 1.0);
  if (rope) {
    if (!rope->is_object()) fail(f.source(), ": 'rope_parameters' must be an object");
    FieldReader r(*rope, f.source() + " rope_parameters");
    theta = r.number_or("rope_theta", theta, 1.0, 1e12);
    partial = r.number_or("partial_rotary_factor", partial, 0.0, 1.0);
    std::string type = string_field(*rope, "rope_type", "default", f.source());
    if (type != "default" && type != "mrope") fail(f.source(), ": rope_type '", type, "' is not supported (only default/mrope)");
  }
  c.rope_theta = theta;
  c.rotary_dim = static_cast<int64_t>(static_cast<double>(c.head_dim) * partial);
  if (c.rotary_dim % 2 != 0 || c.rotary_dim <= 0)
    fail(f.source(), ": rotary dimension head_dim*partial_rotary_factor = ", c.rotary_dim, " must be positive and even");
  c.attn_output_gate = bool_field(*text, "attn_output_gate", f.source()).value_or(true);
  if (!c.attn_output_gate) fail(f.source(), ": attn_output_gate=false is not supported");

  c.linear_num_key_heads = f.integer("linear_num_key_heads", 1, 1024);
  c.linear_num_value_heads = f.integer("linear_num_value_heads", 1, 1024);
  if (c.linear_num_value_heads % c.linear_num_key_heads != 0)
    fail(f.source(), ": linear_num_value_heads (", c.linear_num_value_heads, ") must be a multiple of linear_num_key_heads (", c.linear_num_key_heads,
         ")");
  c.linear_key_head_dim = f.integer("linear_key_head_dim", 1, 4096);
  c.linear_value_head_dim = f.integer("linear_value_head_dim", 1, 4096);
  c.linear_conv_kernel = f.integer_or("linear_conv_kernel_dim", 4, 1, 64);

  std::string act = string_field(*text, "hidden_act", "silu", f.source());
  if (act != "silu") fail(f.source(), ": hidden_act '", act, "' is not supported (Qwen 3.5 uses silu)");

  if (c.moe) {
    c.num_experts = f.integer("num_experts", 1, 4096);
    c.experts_per_token = f.integer("num_experts_per_tok", 1, c.num_experts);
    c.moe_intermediate_size = f.integer("moe_intermediate_size", 1, 1 << 20);
    c.shared_expert_intermediate_size = f.integer_or("shared_expert_intermediate_size", 0, 0, 1 << 20);
    if (auto norm = bool_field(*text, "norm_topk_prob", f.source()); norm && !*norm)
      fail(f.source(), ": norm_topk_prob=false is not supported (Qwen 3.5 always renormalises)");
  } else {
    c.intermediate_size = f.integer("intermediate_size", 1, 1 << 20);
  }
  c.mtp_layers = f.integer_or("mtp_num_hidden_layers", 0, 0, 16);
  // The text config decides; the top level is the fallback (some exports put it there only).
  if (f.find("max_position_embeddings")) c.max_position_embeddings = f.integer("max_position_embeddings", 1, kMaxPositionEmbeddingsLimit);
  else if (c.nested) c.max_position_embeddings = FieldReader(root, source).integer_or("max_position_embeddings", 0, 1, kMaxPositionEmbeddingsLimit);
  read_layer_types(*text, f, c);
  c.quantization = read_quantization(root, c.nested ? text : nullptr, source);

  // Tied embeddings: the text config decides, the top level is the fallback.
  auto tie = bool_field(*text, "tie_word_embeddings", f.source());
  if (!tie && c.nested) tie = bool_field(root, "tie_word_embeddings", source);
  c.tie_word_embeddings = tie.value_or(false);
  return c;
}

CacheShape ModelConfig::cache_shape() const {
  CacheShape s;
  s.attention_layers = count(LayerKind::FullAttention);
  s.deltanet_layers = count(LayerKind::LinearAttention);
  s.kv_row = num_kv_heads * head_dim;
  s.conv_floats = (linear_conv_kernel - 1) * conv_dim();
  s.recurrent_floats = linear_num_value_heads * linear_key_head_dim * linear_value_head_dim;
  return s;
}

}  // namespace qwenrt
