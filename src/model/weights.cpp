#include "model/weights.h"

#include <cmath>
#include <cstring>
#include <optional>
#include <set>

#include "core/error.h"
#include "core/half.h"
#include "core/thread_pool.h"
#include "formats/checkpoint_dir.h"

namespace qwenrt {

namespace {

std::string shape_str(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (std::size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

// Looks tensors up by name, checks them, and remembers which were used so leftovers are caught.
class Binder {
 public:
  Binder(const CheckpointDir& ckpt, const QuantizationConfig& quant) : ckpt_(ckpt), quant_(quant) {}

  // True for checkpoints written by mlx-lm (its sanitize moved the conv taps to [C, K, 1] and baked
  // the (1 + w) of the zero-centred norms into the stored weights): the norms are taken as stored.
  bool norms_shifted = false;

  bool has(const std::string& name) const { return ckpt_.find(name) != nullptr; }

  const TensorInfo& get(const std::string& name, const std::vector<int64_t>& shape) {
    const TensorInfo* t = ckpt_.find(name);
    if (!t) fail(ckpt_.dir().string(), ": missing tensor '", name, "' (expected shape ", shape_str(shape), ")");
    if (t->shape != shape) fail(t->file, ": tensor '", name, "' has shape ", t->shape_string(), ", expected ", shape_str(shape));
    if (t->dtype != DType::BF16 && t->dtype != DType::F16 && t->dtype != DType::F32)
      fail(t->file, ": tensor '", name, "' has dtype ", dtype_name(t->dtype), "; expected BF16, F16 or F32");
    used_.insert(name);
    return *t;
  }

  Weight matrix(const std::string& name, int64_t rows, int64_t cols) { return matrix_nd(name, {rows, cols}); }

  // A matrix of logical shape `shape` ([..., rows, cols]; leading axes such as experts fold into
  // the rows), dense or MLX affine quantized (`<module>.weight` U32 words + `.scales` + `.biases`).
  Weight matrix_nd(const std::string& name, const std::vector<int64_t>& shape) {
    int64_t rows = 1;
    for (std::size_t i = 0; i + 1 < shape.size(); ++i) rows *= shape[i];
    const int64_t cols = shape.back();
    const std::string module = name.size() > 7 && name.ends_with(".weight") ? name.substr(0, name.size() - 7) : name;
    const TensorInfo* packed = ckpt_.find(name);
    if (has(module + ".weight_scale_inv") || (packed && (packed->dtype == DType::F8E4M3 || packed->dtype == DType::F8E5M2)))
      return fp8_matrix(name, module, shape);
    if (!has(module + ".scales")) {
      if (packed && packed->dtype == DType::U32)
        fail(packed->file, ": tensor '", name, "' holds packed U32 words but '", module,
             ".scales' is missing (MLX affine weights need scales and biases)");
      if (has(module + ".biases")) fail(ckpt_.dir().string(), ": '", module, ".biases' is present but '", module, ".scales' is missing");
      const TensorInfo& t = get(name, shape);
      return {weight_format_of(t.dtype), rows, cols, t.data};
    }
    const AffineSpec spec = quant_.spec_for(module);
    const std::string params = " (bits " + std::to_string(spec.bits) + ", group_size " + std::to_string(spec.group_size) + ")";
    if (cols % spec.group_size != 0) fail(ckpt_.dir().string(), ": '", name, "' has ", cols, " inputs, not a multiple of its MLX group size", params);
    if (!packed) fail(ckpt_.dir().string(), ": missing tensor '", name, "' (the packed words of MLX affine '", module, "')");
    if (packed->dtype != DType::U32)
      fail(packed->file, ": tensor '", name, "' has dtype ", dtype_name(packed->dtype), "; an MLX affine weight (it has '", module,
           ".scales') is U32 words");
    std::vector<int64_t> words = shape;
    words.back() = cols * spec.bits / 32;
    if (packed->shape != words) {
      if (packed->shape.size() == shape.size() && std::equal(shape.begin(), shape.end() - 1, packed->shape.begin()))
        fail(packed->file, ": tensor '", name, "' has ", packed->shape.back(), " uint32 words per row, but ", cols, " inputs at ", spec.bits,
             " bits need ", words.back(), params);
      fail(packed->file, ": tensor '", name, "' has shape ", packed->shape_string(), ", expected ", shape_str(words), " (MLX affine, ",
           shape_str(shape), params, ")");
    }
    std::vector<int64_t> group_shape = shape;
    group_shape.back() = cols / spec.group_size;
    auto side = [&](const char* what) -> const TensorInfo& {
      const std::string n = module + "." + what;
      const TensorInfo* t = ckpt_.find(n);
      if (!t)
        fail(ckpt_.dir().string(), ": missing tensor '", n, "' (MLX affine '", module,
             "' needs scales and biases; only mode \"affine\" is supported)");
      if (t->dtype != DType::BF16 && t->dtype != DType::F16 && t->dtype != DType::F32)
        fail(t->file, ": tensor '", n, "' has dtype ", dtype_name(t->dtype), "; MLX affine scales and biases are BF16, F16 or F32");
      if (t->shape != group_shape)
        fail(t->file, ": tensor '", n, "' has shape ", t->shape_string(), ", expected ", shape_str(group_shape), " for ", shape_str(shape), params);
      used_.insert(n);
      return *t;
    };
    const TensorInfo& scales = side("scales");
    const TensorInfo& biases = side("biases");
    if (biases.dtype != scales.dtype)
      fail(biases.file, ": tensor '", module, ".biases' has dtype ", dtype_name(biases.dtype), " but its scales are ", dtype_name(scales.dtype));
    used_.insert(name);
    Weight w{WeightFormat::MlxAffine, rows, cols, packed->data};
    w.quant = {spec.bits, spec.group_size, weight_format_of(scales.dtype), scales.data, biases.data};
    return w;
  }

  // A block FP8 matrix: `<module>.weight` F8_E4M3 [rows, cols] and `<module>.weight_scale_inv`
  // [ceil(rows / br), ceil(cols / bc)] (bf16, f16 or f32). Anything less is an error naming the
  // tensor: an e4m3 weight without its scale would be a silently wrong weight.
  Weight fp8_matrix(const std::string& name, const std::string& module, const std::vector<int64_t>& shape) {
    const std::string scale_name = module + ".weight_scale_inv";
    const TensorInfo* packed = ckpt_.find(name);
    const TensorInfo* scale = ckpt_.find(scale_name);
    const Fp8Config& cfg = quant_.fp8;
    if (!packed) fail(ckpt_.dir().string(), ": missing tensor '", name, "' (its scale '", scale_name, "' is present)");
    if (packed->dtype == DType::F8E5M2) fail(packed->file, ": tensor '", name, "' is F8_E5M2; only F8_E4M3 FP8 weights are supported");
    if (packed->dtype != DType::F8E4M3)
      fail(packed->file, ": tensor '", scale_name, "' is present but '", name, "' has dtype ", dtype_name(packed->dtype),
           " (an FP8 weight is F8_E4M3)");
    if (!scale) fail(packed->file, ": tensor '", name, "' is F8_E4M3 but its scale '", scale_name, "' is missing (it cannot be read without it)");
    if (!cfg.present) fail(packed->file, ": tensor '", name, "' is FP8 but config.json has no quantization_config with quant_method \"fp8\"");
    if (cfg.not_converted(module))
      fail(packed->file, ": tensor '", name, "' is FP8 but ", cfg.source, " lists '", module, "' in modules_to_not_convert");
    if (shape.size() != 2) fail(packed->file, ": tensor '", name, "': FP8 stacks of experts are not supported (per-expert matrices are)");
    if (packed->shape != shape) fail(packed->file, ": tensor '", name, "' has shape ", packed->shape_string(), ", expected ", shape_str(shape));
    const int64_t rows = shape[0], cols = shape[1];
    const std::vector<int64_t> grid{(rows + cfg.block_rows - 1) / cfg.block_rows, (cols + cfg.block_cols - 1) / cfg.block_cols};
    if (scale->dtype != DType::BF16 && scale->dtype != DType::F16 && scale->dtype != DType::F32)
      fail(scale->file, ": tensor '", scale_name, "' has dtype ", dtype_name(scale->dtype), "; FP8 scales are BF16, F16 or F32");
    if (scale->shape != grid)
      fail(scale->file, ": tensor '", scale_name, "' has shape ", scale->shape_string(), ", expected ", shape_str(grid), " (one scale per ",
           cfg.block_rows, "x", cfg.block_cols, " block of ", shape_str(shape), ", weight_block_size in ", cfg.source, ")");
    // The kernels fold 256 into the scale (see matmul_fp8_block.cpp): bounded far below overflow.
    Weight sw{weight_format_of(scale->dtype), 1, scale->numel(), scale->data};
    std::vector<float> s(static_cast<std::size_t>(scale->numel()));
    sw.row_to_f32(0, s.data());
    for (std::size_t i = 0; i < s.size(); ++i)
      if (!std::isfinite(s[i]) || std::fabs(s[i]) > 0x1p100f)
        fail(scale->file, ": tensor '", scale_name, "' holds ", s[i], " at index ", i, " (FP8 scales must be finite and below 2^100)");
    used_.insert(name);
    used_.insert(scale_name);
    Weight w{WeightFormat::Fp8Block, rows, cols, packed->data};
    w.fp8 = {cfg.block_rows, cfg.block_cols, weight_format_of(scale->dtype), scale->data, grid[1], 0};
    return w;
  }

  std::vector<float> vector(const std::string& name, const std::vector<int64_t>& shape) {
    const TensorInfo& t = get(name, shape);
    Weight m{weight_format_of(t.dtype), 1, t.numel(), t.data};
    std::vector<float> out(static_cast<std::size_t>(t.numel()));
    m.row_to_f32(0, out.data());
    for (float v : out)
      if (!std::isfinite(v)) fail(t.file, ": tensor '", name, "' holds a non-finite value");
    return out;
  }

  // The (1 + w) weight of a zero-centred RMSNorm, folded in f32.
  // (mlx-lm checkpoints store 1 + w already: taken as stored.)
  std::vector<float> zero_centred_norm(const std::string& name, int64_t n) {
    auto w = vector(name, {n});
    if (!norms_shifted)
      for (float& v : w) v += 1.0f;
    return w;
  }

  std::vector<int64_t> shape_of(const std::string& name) const { return ckpt_.find(name)->shape; }
  bool used(const std::string& name) const { return used_.count(name) != 0; }

 private:
  const CheckpointDir& ckpt_;
  const QuantizationConfig& quant_;
  std::set<std::string> used_;
};

void bind_attention(Binder& b, const ModelConfig& c, const std::string& p, AttentionWeights& a) {
  const int64_t H = c.hidden_size, Dh = c.head_dim;
  a.q_proj = b.matrix(p + "q_proj.weight", 2 * c.num_heads * Dh, H);
  a.k_proj = b.matrix(p + "k_proj.weight", c.num_kv_heads * Dh, H);
  a.v_proj = b.matrix(p + "v_proj.weight", c.num_kv_heads * Dh, H);
  a.o_proj = b.matrix(p + "o_proj.weight", H, c.num_heads * Dh);
  a.q_norm = b.zero_centred_norm(p + "q_norm.weight", Dh);
  a.k_norm = b.zero_centred_norm(p + "k_norm.weight", Dh);
}

void bind_deltanet(Binder& b, const ModelConfig& c, const std::string& p, DeltaNetWeights& g) {
  const int64_t H = c.hidden_size, nv = c.linear_num_value_heads, K = c.linear_conv_kernel;
  g.in_qkv = b.matrix(p + "in_proj_qkv.weight", c.conv_dim(), H);
  g.in_z = b.matrix(p + "in_proj_z.weight", c.value_dim(), H);
  g.in_b = b.matrix(p + "in_proj_b.weight", nv, H);
  g.in_a = b.matrix(p + "in_proj_a.weight", nv, H);
  g.out_proj = b.matrix(p + "out_proj.weight", H, c.value_dim());
  // Stored [conv_dim, 1, K] as torch writes a depthwise Conv1d; [conv_dim, K] is accepted too; mlx-lm
  // writes [conv_dim, K, 1] (the same values in the same order).
  const std::string conv = p + "conv1d.weight";
  std::vector<int64_t> shape{c.conv_dim(), 1, K};
  if (b.norms_shifted) shape = {c.conv_dim(), K, 1};
  else if (b.has(conv) && b.shape_of(conv).size() == 2) shape = {c.conv_dim(), K};
  g.conv = b.vector(conv, shape);
  g.dt_bias = b.vector(p + "dt_bias", {nv});
  auto a_log = b.vector(p + "A_log", {nv});
  for (float& v : a_log) {
    v = -std::exp(v);
    if (!std::isfinite(v))
      fail("tensor '", p, "A_log': a value above 88 makes the decay −exp(A_log) overflow f32 (the layer's state would turn to NaN)");
  }
  g.neg_exp_a = std::move(a_log);
  g.norm = b.vector(p + "norm.weight", {c.linear_value_head_dim});
}

void bind_mlp(Binder& b, const std::string& p, int64_t H, int64_t I, MlpWeights& m) {
  m.gate = b.matrix(p + "gate_proj.weight", I, H);
  m.up = b.matrix(p + "up_proj.weight", I, H);
  m.down = b.matrix(p + "down_proj.weight", H, I);
}

void bind_moe(Binder& b, const ModelConfig& c, const std::string& p, MoeWeights& m) {
  const int64_t H = c.hidden_size, E = c.num_experts, Ie = c.moe_intermediate_size;
  m.router = b.matrix(p + "gate.weight", E, H);
  m.experts.resize(static_cast<std::size_t>(E));
  if (b.has(p + "experts.gate_up_proj")) {
    // Fused layout: gate_up [E, 2·Ie, H] (gate rows first), down [E, H, Ie].
    const TensorInfo& gu = b.get(p + "experts.gate_up_proj", {E, 2 * Ie, H});
    const TensorInfo& dn = b.get(p + "experts.down_proj", {E, H, Ie});
    Weight gate_up{weight_format_of(gu.dtype), E * 2 * Ie, H, gu.data}, down{weight_format_of(dn.dtype), E * H, Ie, dn.data};
    for (int64_t e = 0; e < E; ++e) {
      auto& x = m.experts[static_cast<std::size_t>(e)];
      x.gate = gate_up.row_slice(e * 2 * Ie, Ie);
      x.up = gate_up.row_slice(e * 2 * Ie + Ie, Ie);
      x.down = down.row_slice(e * H, H);
    }
  } else if (b.has(p + "switch_mlp.gate_proj.weight") || b.has(p + "switch_mlp.gate_proj.scales")) {
    // mlx-lm's layout: switch_mlp.{gate,up}_proj [E, Ie, H], down_proj [E, H, Ie], each dense or quantized.
    Weight gate = b.matrix_nd(p + "switch_mlp.gate_proj.weight", {E, Ie, H}), up = b.matrix_nd(p + "switch_mlp.up_proj.weight", {E, Ie, H});
    Weight down = b.matrix_nd(p + "switch_mlp.down_proj.weight", {E, H, Ie});
    for (int64_t e = 0; e < E; ++e) {
      auto& x = m.experts[static_cast<std::size_t>(e)];
      x.gate = gate.row_slice(e * Ie, Ie);
      x.up = up.row_slice(e * Ie, Ie);
      x.down = down.row_slice(e * H, H);
    }
  } else {
    for (int64_t e = 0; e < E; ++e) bind_mlp(b, p + "experts." + std::to_string(e) + ".", H, Ie, m.experts[static_cast<std::size_t>(e)]);
  }
  if (c.shared_expert_intermediate_size > 0) {
    m.has_shared = true;
    bind_mlp(b, p + "shared_expert.", H, c.shared_expert_intermediate_size, m.shared);
    m.shared_gate = b.matrix(p + "shared_expert_gate.weight", 1, H);
  }
}

}  // namespace

std::size_t ModelWeights::matrix_bytes() const {
  std::size_t n = lm_head.bytes();
  auto mlp_bytes = [](const MlpWeights& m) { return m.gate.bytes() + m.up.bytes() + m.down.bytes(); };
  for (const auto& l : layers) {
    if (l.kind == LayerKind::FullAttention) n += l.attn.q_proj.bytes() + l.attn.k_proj.bytes() + l.attn.v_proj.bytes() + l.attn.o_proj.bytes();
    else n += l.gdn.in_qkv.bytes() + l.gdn.in_z.bytes() + l.gdn.in_b.bytes() + l.gdn.in_a.bytes() + l.gdn.out_proj.bytes();
    if (l.moe.experts.empty()) {
      n += mlp_bytes(l.mlp);
    } else {
      n += l.moe.router.bytes();
      for (const auto& e : l.moe.experts) n += mlp_bytes(e);
      if (l.moe.has_shared) n += mlp_bytes(l.moe.shared) + l.moe.shared_gate.bytes();
    }
  }
  return n;
}

ModelWeights bind_weights(const ModelConfig& c, const CheckpointDir& ckpt) {
  Binder b(ckpt, c.quantization);
  ModelWeights w;
  // HF names (model.language_model.* or model.*) or mlx-lm's (language_model.model.*, language_model.lm_head).
  std::string prefix = "model.", head = "lm_head";
  for (const char* m : {"model.language_model.", "language_model.model."}) {
    const std::string e = std::string(m) + "embed_tokens.";
    if (b.has(e + "weight") || b.has(e + "scales")) prefix = m;
  }
  if (prefix == "language_model.model.") head = "language_model.lm_head";
  // mlx-lm's sanitize moves the conv taps to [C, K, 1] and bakes (1 + w) into the zero-centred
  // norms in the same step: the conv layout tells which convention the norms follow.
  for (int64_t i = 0; i < c.num_layers; ++i) {
    if (c.layer_types[static_cast<std::size_t>(i)] != LayerKind::LinearAttention) continue;
    const std::string conv = prefix + "layers." + std::to_string(i) + ".linear_attn.conv1d.weight";
    if (!b.has(conv)) break;
    const auto s = b.shape_of(conv);
    b.norms_shifted = c.linear_conv_kernel > 1 ? (s.size() == 3 && s[2] == 1 && s[1] == c.linear_conv_kernel) : prefix == "language_model.model.";
    break;
  }
  const int64_t H = c.hidden_size, V = c.vocab_size;
  w.embed = b.matrix(prefix + "embed_tokens.weight", V, H);
  const bool has_head = b.has(head + ".weight");
  if (c.tie_word_embeddings && has_head) fail(ckpt.dir().string(), ": config says tie_word_embeddings=true but the checkpoint has ", head, ".weight");
  if (!c.tie_word_embeddings && !has_head)
    fail(ckpt.dir().string(), ": config says tie_word_embeddings=false but the checkpoint has no ", head, ".weight");
  w.lm_head = c.tie_word_embeddings ? w.embed : b.matrix(head + ".weight", V, H);
  w.final_norm = b.zero_centred_norm(prefix + "norm.weight", H);

  for (int64_t i = 0; i < c.num_layers; ++i) {
    LayerWeights l;
    l.kind = c.layer_types[static_cast<std::size_t>(i)];
    const std::string p = prefix + "layers." + std::to_string(i) + ".";
    l.input_norm = b.zero_centred_norm(p + "input_layernorm.weight", H);
    l.post_norm = b.zero_centred_norm(p + "post_attention_layernorm.weight", H);
    if (l.kind == LayerKind::FullAttention) bind_attention(b, c, p + "self_attn.", l.attn);
    else bind_deltanet(b, c, p + "linear_attn.", l.gdn);
    if (c.moe) bind_moe(b, c, p + "mlp.", l.moe);
    else bind_mlp(b, p + "mlp.", H, c.intermediate_size, l.mlp);
    w.layers.push_back(std::move(l));
  }

  // The MTP block, when the checkpoint ships one (released Qwen 3.5 does; mlx-lm conversions drop it).
  if (b.has("mtp.fc.weight")) {
    MtpWeights& m = w.mtp;
    m.fc = b.matrix("mtp.fc.weight", H, 2 * H);
    m.pre_fc_norm_embedding = b.zero_centred_norm("mtp.pre_fc_norm_embedding.weight", H);
    m.pre_fc_norm_hidden = b.zero_centred_norm("mtp.pre_fc_norm_hidden.weight", H);
    m.norm = b.zero_centred_norm("mtp.norm.weight", H);
    const std::string p = "mtp.layers.0.";
    m.layer.kind = LayerKind::FullAttention;
    m.layer.input_norm = b.zero_centred_norm(p + "input_layernorm.weight", H);
    m.layer.post_norm = b.zero_centred_norm(p + "post_attention_layernorm.weight", H);
    bind_attention(b, c, p + "self_attn.", m.layer.attn);
    if (c.moe) bind_moe(b, c, p + "mlp.", m.layer.moe);
    else bind_mlp(b, p + "mlp.", H, c.intermediate_size, m.layer.mlp);
    m.present = true;
  }

  for (const auto& [name, t] : ckpt.tensors()) {
    if (name.rfind("mtp.", 0) == 0) {
      w.mtp_tensors.push_back(name);
      if (!b.used(name) && w.mtp.present)
        fail(t->file, ": unexpected tensor '", name, "' (qwenrt reads one MTP block: mtp.fc, the pre-fc norms, mtp.norm, mtp.layers.0)");
      continue;
    }
    if (b.used(name)) continue;
    if (name.rfind("model.visual.", 0) == 0) continue;  // the vision tower loads separately
    fail(t->file, ": unexpected tensor '", name, "' (not part of a ", c.architecture, " with this config)");
  }
  return w;
}

namespace {

// A bf16 matrix of uniform noise in [−scale, scale], filled in parallel.
Weight random_matrix(ModelWeights& w, int64_t rows, int64_t cols, float scale, uint64_t seed) {
  const std::size_t n = static_cast<std::size_t>(rows * cols);
  std::shared_ptr<uint16_t[]> buf(new uint16_t[n]);
  ThreadPool::global().parallel_for(n, 1 << 16, [&](std::size_t b, std::size_t e) {
    uint64_t s = seed * 0x9e3779b97f4a7c15ull + b + 1;
    for (std::size_t i = b; i < e; ++i) {
      s ^= s << 13, s ^= s >> 7, s ^= s << 17;
      float u = static_cast<float>(s >> 40) / static_cast<float>(1ull << 24) * 2.0f - 1.0f;
      buf[i] = f32_to_bf16(u * scale);
    }
  });
  w.owned.push_back(buf);
  return {WeightFormat::BF16, rows, cols, reinterpret_cast<const std::byte*>(buf.get())};
}

// `n` random bytes, filled in parallel (owned by `w`).
std::byte* random_bytes(ModelWeights& w, std::size_t n, uint64_t seed) {
  std::shared_ptr<uint64_t[]> buf(new uint64_t[(n + 7) / 8]);
  ThreadPool::global().parallel_for((n + 7) / 8, 1 << 14, [&](std::size_t b, std::size_t e) {
    uint64_t s = seed * 0x9e3779b97f4a7c15ull + b + 1;
    for (std::size_t i = b; i < e; ++i) {
      s ^= s << 13, s ^= s >> 7, s ^= s << 17;
      buf[i] = s * 0x2545f4914f6cdd1dull;
    }
  });
  w.owned.push_back(buf);
  return reinterpret_cast<std::byte*>(buf.get());
}

// `n` copies of one bf16 value.
std::byte* constant_bf16(ModelWeights& w, std::size_t n, float v) {
  std::shared_ptr<uint16_t[]> buf(new uint16_t[n]);
  std::fill(buf.get(), buf.get() + n, f32_to_bf16(v));
  w.owned.push_back(buf);
  return reinterpret_cast<std::byte*>(buf.get());
}

// Random MLX affine words whose values spread over [−scale, scale] (g64, bf16 scales and biases).
Weight random_mlx_matrix(ModelWeights& w, int64_t rows, int64_t cols, int bits, float scale, uint64_t seed) {
  Weight m{WeightFormat::MlxAffine, rows, cols, nullptr};
  m.quant = {bits, 64, WeightFormat::BF16, nullptr, nullptr};
  m.data = random_bytes(w, m.row_bytes() * static_cast<std::size_t>(rows), seed);
  const std::size_t groups = static_cast<std::size_t>(rows * (cols / 64));
  m.quant.scales = constant_bf16(w, groups, 2.0f * scale / static_cast<float>((1 << bits) - 1));
  m.quant.biases = constant_bf16(w, groups, -scale);
  return m;
}

// Random e4m3 bytes (the NaN codes cleared) with bf16 scales per 128x128 block: values in about
// [−scale, scale].
Weight random_fp8_matrix(ModelWeights& w, int64_t rows, int64_t cols, float scale, uint64_t seed) {
  Weight m{WeightFormat::Fp8Block, rows, cols, random_bytes(w, static_cast<std::size_t>(rows * cols), seed)};
  auto* bytes = const_cast<uint8_t*>(reinterpret_cast<const uint8_t*>(m.data));
  for (int64_t i = 0; i < rows * cols; ++i)
    if ((bytes[i] & 0x7f) == 0x7f) bytes[i] &= 0xfe;
  const int64_t gr = (rows + 127) / 128, gc = (cols + 127) / 128;
  m.fp8 = {128, 128, WeightFormat::BF16, constant_bf16(w, static_cast<std::size_t>(gr * gc), scale / 448.0f), gc, 0};
  return m;
}

}  // namespace

ModelWeights synthetic_weights(const ModelConfig& c, uint64_t seed, bool host_matrices, SyntheticFormat format) {
  ModelWeights w;
  const int64_t H = c.hidden_size;
  uint64_t s = seed;
  const bool mlx = format == SyntheticFormat::MlxQ4 || format == SyntheticFormat::MlxQ8;
  const int bits = format == SyntheticFormat::MlxQ4 ? 4 : 8;
  // Matrices in the chosen format; `small` ones (router, gates, in_proj_a/b, embedding, head) are
  // the ones Qwen's FP8 release keeps in bf16 (mlx-lm quantizes them; routers at 8 bits).
  auto packed = [&](int64_t r, int64_t k, float scale, bool small, int mlx_bits) -> std::optional<Weight> {
    const bool fp8 = format == SyntheticFormat::Fp8 && !small;
    if (!host_matrices && ((mlx && k % 64 == 0) || fp8)) {
      // Made on the device at upload (model/cuda/quant_upload.h), with the host's layout and scales.
      Weight m{mlx ? WeightFormat::MlxAffine : WeightFormat::Fp8Block, r, k, nullptr};
      if (mlx) m.quant = {mlx_bits, 64, WeightFormat::BF16, nullptr, nullptr};
      else m.fp8 = {128, 128, WeightFormat::BF16, nullptr, (k + 127) / 128, 0};
      m.random_seed = ++s;
      m.random_scale = scale;
      return m;
    }
    if (mlx && k % 64 == 0) return random_mlx_matrix(w, r, k, mlx_bits, scale, ++s);
    if (fp8) return random_fp8_matrix(w, r, k, scale, ++s);
    return std::nullopt;
  };
  auto dense = [&](int64_t r, int64_t k, float scale) {
    if (host_matrices) return random_matrix(w, r, k, scale, ++s);
    Weight m{WeightFormat::BF16, r, k, nullptr};
    m.random_seed = ++s;
    m.random_scale = scale;
    return m;
  };
  auto random = [&](int64_t r, int64_t k, float scale) {
    if (auto m = packed(r, k, scale, false, bits)) return *m;
    if (host_matrices) return random_matrix(w, r, k, scale, ++s);
    Weight m{WeightFormat::BF16, r, k, nullptr};
    m.random_seed = ++s;
    m.random_scale = scale;
    return m;
  };
  auto mat = [&](int64_t r, int64_t k) { return random(r, k, 1.0f / std::sqrt(static_cast<float>(k))); };
  // A matrix Qwen's FP8 keeps in bf16 (mlx-lm quantizes it, at `mlx_bits`).
  auto small_mat = [&](int64_t r, int64_t k, int mlx_bits) {
    const float scale = 1.0f / std::sqrt(static_cast<float>(k));
    if (auto m = packed(r, k, scale, true, mlx_bits)) return *m;
    return dense(r, k, scale);
  };
  auto ones = [](int64_t n) { return std::vector<float>(static_cast<std::size_t>(n), 1.0f); };
  w.embed = format == SyntheticFormat::Fp8 ? dense(c.vocab_size, H, 1.0f) : random(c.vocab_size, H, 1.0f);
  w.lm_head = c.tie_word_embeddings ? w.embed : small_mat(c.vocab_size, H, bits);
  w.final_norm = ones(H);
  auto mlp = [&](int64_t I) { return MlpWeights{mat(I, H), mat(I, H), mat(H, I)}; };
  auto layer = [&](LayerKind kind) {
    LayerWeights l;
    l.kind = kind;
    l.input_norm = ones(H);
    l.post_norm = ones(H);
    if (l.kind == LayerKind::FullAttention) {
      l.attn = {mat(2 * c.num_heads * c.head_dim, H),
                mat(c.num_kv_heads * c.head_dim, H),
                mat(c.num_kv_heads * c.head_dim, H),
                mat(H, c.num_heads * c.head_dim),
                ones(c.head_dim),
                ones(c.head_dim)};
    } else {
      const int64_t nv = c.linear_num_value_heads;
      l.gdn.in_qkv = mat(c.conv_dim(), H);
      l.gdn.in_z = mat(c.value_dim(), H);
      l.gdn.in_b = small_mat(nv, H, bits);
      l.gdn.in_a = small_mat(nv, H, bits);
      l.gdn.out_proj = mat(H, c.value_dim());
      l.gdn.conv = std::vector<float>(static_cast<std::size_t>(c.conv_dim() * c.linear_conv_kernel), 0.25f);
      l.gdn.dt_bias = std::vector<float>(static_cast<std::size_t>(nv), 0.0f);
      l.gdn.neg_exp_a = std::vector<float>(static_cast<std::size_t>(nv), -1.0f);
      l.gdn.norm = ones(c.linear_value_head_dim);
    }
    if (c.moe) {
      l.moe.router = small_mat(c.num_experts, H, 8);
      for (int64_t e = 0; e < c.num_experts; ++e) l.moe.experts.push_back(mlp(c.moe_intermediate_size));
      if (c.shared_expert_intermediate_size > 0) {
        l.moe.has_shared = true;
        l.moe.shared = mlp(c.shared_expert_intermediate_size);
        l.moe.shared_gate = small_mat(1, H, 8);
      }
    } else {
      l.mlp = mlp(c.intermediate_size);
    }
    return l;
  };
  for (int64_t i = 0; i < c.num_layers; ++i) w.layers.push_back(layer(c.layer_types[static_cast<std::size_t>(i)]));
  // The MTP block every released checkpoint ships (speculation benchmarks; random drafts are never
  // right: bench --accept-rate forces the acceptance).
  w.mtp.present = true;
  w.mtp.fc = mat(H, 2 * H);
  w.mtp.pre_fc_norm_embedding = ones(H);
  w.mtp.pre_fc_norm_hidden = ones(H);
  w.mtp.norm = ones(H);
  w.mtp.layer = layer(LayerKind::FullAttention);
  return w;
}

}  // namespace qwenrt
