// Quantized models on the GPU against the same quantized model on the CPU. No quantized fixture
// has the released head sizes CudaForward builds (tests/fixtures' MLX and FP8 fixtures have
// head_dim 32), so the demo model (models/qwen35-demo-16m: released head sizes) is quantized here
// with the engine's own tools: `qwenrt quantize`'s exporter (model/mlx_export.h) for MLX affine
// 4-bit g64 (packed as stored), 8-bit g32, 3-bit g64 (repacked into 4-bit containers) and mlx-lm's
// mixed_3_6 recipe (6-bit layers in 8-bit containers), and e4m3 with bf16 scales per 128x128 block
// (as Qwen's FP8 release, embedding, head and in_proj_a/b kept bf16) for FP8.
//
// Bound: bf16 noise as the CudaParity tests bound it, the larger of the released_heads fixture's
// transformers-bf16 error and twice the unquantized demo model's own GPU-vs-CPU error measured here
// (both printed).
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>

#include "backend/cuda/gpu_test_support.h"
#include "engine/greedy_generation.h"
#include "formats/checkpoint_dir.h"
#include "formats/json_file.h"
#include "model/cuda/cuda_forward.h"
#include "model/mlx_export.h"
#include "model/qwen35_model.h"
#include "model/weights.h"
#include "support/fixtures.h"

namespace qwenrt {
namespace {

namespace fs = std::filesystem;

fs::path demo_dir() {
  const fs::path root = test::fixtures_dir().parent_path().parent_path() / "models" / "qwen35-demo-16m";
  return fs::exists(root / "config.json") ? root : fs::path{};
}

std::vector<int32_t> prompt_tokens(int64_t vocab) {
  std::vector<int32_t> p;
  for (int i = 0; i < 40; ++i) p.push_back(static_cast<int32_t>((i * 977 + 13) % vocab));
  return p;
}

// Prompt logits at windows of the whole prompt (prompt rows: dequantized + cuBLAS), 4 and 1 rows
// (decode-shaped products), then 4 decode steps' logits.
std::vector<std::vector<float>> logits_of(const Qwen35Model& model, ThreadPool& pool) {
  const auto prompt = prompt_tokens(model.config().vocab_size);
  std::vector<std::vector<float>> out;
  for (int64_t chunk : {static_cast<int64_t>(prompt.size()), int64_t{4}, int64_t{1}}) out.push_back(prompt_logits(model, prompt, chunk, pool));
  ModelCache cache = model.new_cache(1);
  const int s = cache.acquire();
  model.forward({Phase::Window, {{s, prompt}}, false}, cache, pool);
  std::vector<float> decode;
  for (int i = 0; i < 4; ++i) {
    const auto l = model.forward({Phase::Decode, {{s, {static_cast<int32_t>(100 + 37 * i)}}}, false}, cache, pool);
    decode.insert(decode.end(), l.begin(), l.end());
  }
  out.push_back(decode);
  return out;
}

const char* kWhat[] = {"prompt window (all rows)", "windows of 4", "windows of 1", "decode steps"};

// The largest GPU-vs-CPU error over the four kinds of steps (each printed).
double gpu_vs_cpu(const std::string& name, const Qwen35Model& cpu, const Qwen35Model& gpu, ThreadPool& pool) {
  const auto want = logits_of(cpu, pool), got = logits_of(gpu, pool);
  double worst = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    const double err = test::relative_l2(got[i], std::vector<double>(want[i].begin(), want[i].end()));
    std::printf("[ parity   ] %s %s: vs the cpu rel_l2 %.3e\n", name.c_str(), kWhat[i], err);
    worst = std::max(worst, err);
  }
  return worst;
}

// The bound: bf16 noise (see the top of the file), measured once.
double bf16_bound(ThreadPool& pool) {
  static const double bound = [&] {
    const double fixture = read_json_file(test::fixtures_dir() / "released_heads" / "reference.json").at("bfloat16_hf_rel_l2").get<double>();
    const Qwen35Model cpu = Qwen35Model::load(demo_dir());
    Qwen35Model gpu = Qwen35Model::load(demo_dir());
    gpu.use_device(parse_device("cuda"));
    const double demo = gpu_vs_cpu("demo bf16", cpu, gpu, pool);
    std::printf("[ parity   ] bound: max(released_heads transformers bf16 %.3e, 2 x demo bf16 cuda vs cpu %.3e)\n", fixture, 2 * demo);
    return std::max(fixture, 2 * demo);
  }();
  return bound;
}

// ---- FP8 of the demo model ----------------------------------------------------------------------

// e4m3 codes 0x00..0x7e (the non-negative finite values, increasing with the code).
const std::vector<float>& e4m3_positive() {
  static const std::vector<float> v = [] {
    std::vector<float> t;
    for (int q = 0; q < 0x7f; ++q) t.push_back(fp8_e4m3_to_f32(static_cast<uint8_t>(q)));
    return t;
  }();
  return v;
}

uint8_t nearest_e4m3(float x) {
  const auto& t = e4m3_positive();
  const float a = std::min(std::fabs(x), t.back());
  const auto it = std::lower_bound(t.begin(), t.end(), a);
  auto q = static_cast<int>(it - t.begin());
  if (q > 0 && (q == static_cast<int>(t.size()) || a - t[static_cast<std::size_t>(q - 1)] <= t[static_cast<std::size_t>(q)] - a)) --q;
  return static_cast<uint8_t>(q | (x < 0 ? 0x80 : 0));
}

// w as e4m3 with a bf16 scale per 128x128 block (amax / 448), storage owned by `owner`.
Weight to_fp8(const Weight& w, ModelWeights& owner) {
  constexpr int64_t B = 128;
  const int64_t gr = (w.rows + B - 1) / B, gc = (w.cols + B - 1) / B;
  std::shared_ptr<uint8_t[]> bytes(new uint8_t[static_cast<std::size_t>(w.rows * w.cols)]);
  std::shared_ptr<uint16_t[]> scales(new uint16_t[static_cast<std::size_t>(gr * gc)]);
  std::vector<float> dense(static_cast<std::size_t>(w.rows * w.cols));
  for (int64_t r = 0; r < w.rows; ++r) w.row_to_f32(r, dense.data() + r * w.cols);
  for (int64_t tr = 0; tr < gr; ++tr)
    for (int64_t tc = 0; tc < gc; ++tc) {
      float amax = 0;
      for (int64_t r = tr * B; r < std::min(w.rows, (tr + 1) * B); ++r)
        for (int64_t c = tc * B; c < std::min(w.cols, (tc + 1) * B); ++c)
          amax = std::max(amax, std::fabs(dense[static_cast<std::size_t>(r * w.cols + c)]));
      const uint16_t s16 = f32_to_bf16(amax > 0 ? amax / 448.0f : 1.0f);
      scales[static_cast<std::size_t>(tr * gc + tc)] = s16;
      const float s = bf16_to_f32(s16);
      for (int64_t r = tr * B; r < std::min(w.rows, (tr + 1) * B); ++r)
        for (int64_t c = tc * B; c < std::min(w.cols, (tc + 1) * B); ++c)
          bytes[static_cast<std::size_t>(r * w.cols + c)] = nearest_e4m3(dense[static_cast<std::size_t>(r * w.cols + c)] / s);
    }
  owner.owned.push_back(bytes);
  owner.owned.push_back(scales);
  Weight q{WeightFormat::Fp8Block, w.rows, w.cols, reinterpret_cast<const std::byte*>(bytes.get())};
  q.fp8 = {static_cast<int>(B), static_cast<int>(B), WeightFormat::BF16, reinterpret_cast<const std::byte*>(scales.get()), gc, 0};
  return q;
}

// The demo model with every projection Qwen's FP8 release quantizes in FP8.
Qwen35Model fp8_demo(const Qwen35Model& demo) {
  ModelWeights w = demo.weights();
  for (auto& L : w.layers) {
    for (Weight* m : {&L.attn.q_proj, &L.attn.k_proj, &L.attn.v_proj, &L.attn.o_proj, &L.gdn.in_qkv, &L.gdn.in_z, &L.gdn.out_proj, &L.mlp.gate,
                      &L.mlp.up, &L.mlp.down})
      if (m->rows > 0) *m = to_fp8(*m, w);
  }
  return Qwen35Model(demo.config(), std::move(w));
}

// ---- the cases ----------------------------------------------------------------------------------

struct QuantCase {
  std::string name;
  int bits = 0, group = 0;
  std::string recipe;  // "" or mlx-lm's mixed recipe; bits 0: FP8
};

class CudaQuantParity : public ::testing::TestWithParam<QuantCase> {
 protected:
  void SetUp() override {
    QWENRT_REQUIRE_GPU();
    if (demo_dir().empty()) GTEST_SKIP() << "no demo model";
  }
  ThreadPool pool_{1};
};

TEST_P(CudaQuantParity, LogitsWithinBf16NoiseOfTheCpu) {
  const QuantCase& q = GetParam();
  const double bound = bf16_bound(pool_);
  auto load_twice = [&](auto make) {
    std::pair<std::unique_ptr<Qwen35Model>, std::unique_ptr<Qwen35Model>> m{make(), make()};
    m.second->use_device(parse_device("cuda"));
    return m;
  };
  std::pair<std::unique_ptr<Qwen35Model>, std::unique_ptr<Qwen35Model>> models;
  std::unique_ptr<Qwen35Model> demo;
  fs::path dir;
  if (q.bits == 0) {
    demo = std::make_unique<Qwen35Model>(Qwen35Model::load(demo_dir()));  // owns the mapped bf16 weights
    models = load_twice([&] { return std::make_unique<Qwen35Model>(fp8_demo(*demo)); });
  } else {
    dir = fs::temp_directory_path() / ("qwenrt-cuda-quant-" + q.name + "-" + std::to_string(getpid()));
    fs::remove_all(dir);
    const CheckpointDir ckpt(demo_dir());
    const ModelConfig c = parse_model_config(ckpt.config(), demo_dir().string());
    MlxQuantizeOptions opt;
    opt.bits = q.bits;
    opt.group_size = q.group;
    opt.recipe = q.recipe;
    export_mlx_affine(ckpt, c, opt, dir, pool_, [](std::size_t, std::size_t) {});
    models = load_twice([&] { return std::make_unique<Qwen35Model>(Qwen35Model::load(dir)); });
  }
  const double err = gpu_vs_cpu(q.name, *models.first, *models.second, pool_);
  RecordProperty("cuda_vs_cpu_rel_l2", std::to_string(err));
  EXPECT_LE(err, bound) << q.name;
  models = {};
  if (!dir.empty()) fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Demo, CudaQuantParity,
                         ::testing::Values(QuantCase{"mlx_q4_g64", 4, 64, ""}, QuantCase{"mlx_q8_g32", 8, 32, ""}, QuantCase{"mlx_q3_g64", 3, 64, ""},
                                           QuantCase{"mlx_mixed_3_6", 3, 64, "mixed_3_6"}, QuantCase{"fp8_128x128", 0, 0, ""}),
                         [](const auto& info) { return info.param.name; });

// `m` with every matrix dequantized and rounded to bf16 (storage owned by the copy's weights): on
// the CPU, a measure of how far bf16 rounding alone moves this model's logits.
Qwen35Model rounded_to_bf16(const Qwen35Model& m) {
  ModelWeights w = m.weights();
  auto round = [&w](Weight& x) {
    if (x.rows == 0) return;
    std::shared_ptr<uint16_t[]> buf(new uint16_t[static_cast<std::size_t>(x.rows * x.cols)]);
    std::vector<float> row(static_cast<std::size_t>(x.cols));
    for (int64_t r = 0; r < x.rows; ++r) {
      x.row_to_f32(r, row.data());
      for (int64_t c = 0; c < x.cols; ++c) buf[static_cast<std::size_t>(r * x.cols + c)] = f32_to_bf16(row[static_cast<std::size_t>(c)]);
    }
    w.owned.push_back(buf);
    x = Weight{WeightFormat::BF16, x.rows, x.cols, reinterpret_cast<const std::byte*>(buf.get())};
  };
  const bool tied = w.lm_head.data == w.embed.data;
  round(w.embed);
  if (tied) w.lm_head = w.embed;
  else round(w.lm_head);
  for (auto& L : w.layers) {
    for (Weight* x : {&L.attn.q_proj, &L.attn.k_proj, &L.attn.v_proj, &L.attn.o_proj, &L.gdn.in_qkv, &L.gdn.in_z, &L.gdn.in_b, &L.gdn.in_a,
                      &L.gdn.out_proj, &L.mlp.gate, &L.mlp.up, &L.mlp.down, &L.moe.router, &L.moe.shared_gate, &L.moe.shared.gate, &L.moe.shared.up,
                      &L.moe.shared.down})
      round(*x);
    for (auto& e : L.moe.experts)
      for (Weight* x : {&e.gate, &e.up, &e.down}) round(*x);
  }
  return Qwen35Model(m.config(), std::move(w));
}

// A quantized MoE (its experts, router and shared expert dequantized to bf16 at upload into the
// stacked layout the expert kernels read; attention and DeltaNet weights packed): the moe_released
// fixture (released head sizes, 64 experts top-8 and a shared expert) quantized with the exporter
// at 4 bits g64 and 8 bits g32 (its down_proj, 16 columns, stays bf16 as mlx-lm leaves it), against
// the same checkpoint on the CPU. Bound: bf16 noise, as large as it is for this model: the larger
// of the fixture's transformers-bf16 error, twice the unquantized fixture's own GPU-vs-CPU error
// over the same steps, and how far rounding the quantized model's weights to bf16 moves its logits
// on the CPU (routing amplifies bf16 noise, and more in some models than others: measured, the 4-bit
// model's decode steps move 1.7e-2 under that rounding, the 8-bit one's 6e-3).
TEST(CudaQuantMoe, LogitsWithinBf16NoiseOfTheCpu) {
  QWENRT_REQUIRE_GPU();
  ThreadPool pool(1);
  const fs::path src = test::fixtures_dir() / "moe_released";
  double bound = read_json_file(src / "reference.json").at("bfloat16_hf_rel_l2").get<double>();
  {
    const Qwen35Model cpu = Qwen35Model::load(src);
    Qwen35Model gpu = Qwen35Model::load(src);
    gpu.use_device(parse_device("cuda"));
    const double own = gpu_vs_cpu("moe_released bf16", cpu, gpu, pool);
    std::printf("[ parity   ] bound: max(moe_released transformers bf16 %.3e, 2 x its bf16 cuda vs cpu %.3e)\n", bound, 2 * own);
    bound = std::max(bound, 2 * own);
  }
  for (const auto& [bits, group] : {std::pair{4, 64}, std::pair{8, 32}}) {
    const std::string name = "moe_released_q" + std::to_string(bits) + "_g" + std::to_string(group);
    const fs::path dir = fs::temp_directory_path() / ("qwenrt-cuda-quant-" + name + "-" + std::to_string(getpid()));
    fs::remove_all(dir);
    const CheckpointDir ckpt(src);
    MlxQuantizeOptions opt;
    opt.bits = bits;
    opt.group_size = group;
    export_mlx_affine(ckpt, parse_model_config(ckpt.config(), src.string()), opt, dir, pool, [](std::size_t, std::size_t) {});
    {
      const Qwen35Model cpu = Qwen35Model::load(dir);
      ASSERT_TRUE(cpu.config().moe && cpu.config().quantization.present) << name;
      const double rounding = gpu_vs_cpu(name + " weights rounded to bf16 (cpu)", cpu, rounded_to_bf16(cpu), pool);
      const double model_bound = std::max(bound, rounding);
      std::printf("[ parity   ] %s bound: max(%.3e, its bf16 rounding on the cpu %.3e)\n", name.c_str(), bound, rounding);
      Qwen35Model gpu = Qwen35Model::load(dir);
      gpu.use_device(parse_device("cuda"));
      const double err = gpu_vs_cpu(name, cpu, gpu, pool);
      EXPECT_LE(err, model_bound) << name;
    }
    fs::remove_all(dir);
  }
}

// Packed experts (every expert, the shared one included, quantized alike: MoeExperts::packed, the
// form mlx-community and Qwen's FP8 MoE checkpoints take): moe_released's shapes with an FFN and
// hidden size of 128 so that g64 groups and 128x128 FP8 tiles fit, random weights in the synthetic
// formats (host copies), GPU against CPU. Decode rows read the packed experts (exact values), prompt
// windows a bf16 copy of the layer's stacks. Bound as above: twice the bf16 model's own GPU-vs-CPU
// error, or how far rounding the quantized weights to bf16 moves the logits on the CPU.
TEST(CudaQuantMoe, PackedExpertsWithinBf16NoiseOfTheCpu) {
  QWENRT_REQUIRE_GPU();
  ThreadPool pool(1);
  ModelConfig c = Qwen35Model::load(test::fixtures_dir() / "moe_released").config();
  c.hidden_size = 128;
  c.moe_intermediate_size = c.shared_expert_intermediate_size = 128;
  double own = 0;
  {
    const Qwen35Model cpu(c, synthetic_weights(c, 5));
    Qwen35Model gpu(c, synthetic_weights(c, 5));
    gpu.use_device(parse_device("cuda"));
    own = gpu_vs_cpu("moe 128 bf16", cpu, gpu, pool);
  }
  for (SyntheticFormat f : {SyntheticFormat::MlxQ4, SyntheticFormat::MlxQ8, SyntheticFormat::Fp8}) {
    const std::string name = f == SyntheticFormat::MlxQ4 ? "moe 128 q4" : f == SyntheticFormat::MlxQ8 ? "moe 128 q8" : "moe 128 fp8";
    const Qwen35Model cpu(c, synthetic_weights(c, 5, true, f));
    Qwen35Model gpu(c, synthetic_weights(c, 5, true, f));
    gpu.use_device(parse_device("cuda"));
    bool packed = false;
    for (const auto& L : gpu.weights().layers)
      if (!L.moe.experts.empty()) packed = L.moe.experts[0].gate.bound.format != WeightFormat::BF16 && L.moe.shared.down.bound.format != WeightFormat::BF16;
    ASSERT_TRUE(packed) << name << ": the experts were not kept packed";
    const double rounding = gpu_vs_cpu(name + " weights rounded to bf16 (cpu)", cpu, rounded_to_bf16(cpu), pool);
    const double bound = std::max(2 * own, rounding);
    std::printf("[ parity   ] %s bound: max(2 x bf16 cuda vs cpu %.3e, bf16 rounding on the cpu %.3e)\n", name.c_str(), 2 * own, rounding);
    EXPECT_LE(gpu_vs_cpu(name, cpu, gpu, pool), bound) << name;
  }
}

// Synthetic quantized weights made on the GPU (qwenrt bench --device cuda --quant) run, with
// finite logits.
TEST(CudaQuantSynthetic, DeviceMadeWeightsRun) {
  QWENRT_REQUIRE_GPU();
  if (demo_dir().empty()) GTEST_SKIP() << "no demo model";
  ThreadPool pool(1);
  const ModelConfig c = Qwen35Model::load(demo_dir()).config();
  for (SyntheticFormat f : {SyntheticFormat::MlxQ4, SyntheticFormat::MlxQ8, SyntheticFormat::Fp8}) {
    Qwen35Model model(c, synthetic_weights(c, 99, /*host_matrices=*/false, f));
    model.use_device(parse_device("cuda"));
    for (const auto& l : logits_of(model, pool))
      for (float v : l) ASSERT_TRUE(std::isfinite(v));
  }
}

}  // namespace
}  // namespace qwenrt
