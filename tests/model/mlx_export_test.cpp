// qwenrt quantize's writer (model/mlx_export.h): the quantizer's arithmetic on known groups, the
// per-module choices mlx-lm makes, and a round trip: every tensor of a bf16 fixture, quantized and
// loaded back, is where the loader reads it (norms as bf16 1 + w, conv and A_log unchanged, each
// expert's rows its own, each matrix within its quantization step). Byte equality with mlx-lm's
// own conversion is checked by tests/cli/test_quantize_mlx.py.
#include "model/mlx_export.h"

#include <unistd.h>

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "core/error.h"
#include "core/half.h"
#include "engine/greedy_generation.h"
#include "formats/checkpoint_dir.h"
#include "formats/mlx_affine_quantize.h"
#include "formats/npy.h"
#include "model/qwen35_model.h"
#include "model/weights.h"
#include "support/fixtures.h"

namespace qwenrt {
namespace {

namespace fs = std::filesystem;

// Dequantizes what mlx_affine_quantize_row wrote through the loader's own reader.
std::vector<float> round_trip(const std::vector<float>& w, int bits, int gs, std::vector<uint16_t>* scales_out = nullptr) {
  const int64_t cols = static_cast<int64_t>(w.size());
  std::vector<uint8_t> packed(static_cast<std::size_t>(cols * bits / 8));
  std::vector<uint16_t> scales(static_cast<std::size_t>(cols / gs)), biases(scales.size());
  mlx_affine_quantize_row(w.data(), cols, bits, gs, DType::BF16, packed.data(), reinterpret_cast<std::byte*>(scales.data()),
                          reinterpret_cast<std::byte*>(biases.data()));
  Weight m{WeightFormat::MlxAffine, 1, cols, reinterpret_cast<const std::byte*>(packed.data())};
  m.quant = {bits, gs, WeightFormat::BF16, reinterpret_cast<const std::byte*>(scales.data()), reinterpret_cast<const std::byte*>(biases.data())};
  std::vector<float> out(w.size());
  m.row_to_f32(0, out.data());
  if (scales_out) *scales_out = scales;
  return out;
}

TEST(MlxAffineQuantize, GroupsRoundTripWithinHalfAStep) {
  for (int bits : {2, 3, 4, 5, 6, 8}) {
    std::vector<float> w(128);
    for (std::size_t i = 0; i < w.size(); ++i) w[i] = bf16_to_f32(f32_to_bf16(std::sin(0.37f * static_cast<float>(i)) * (i < 64 ? 0.05f : 2.0f)));
    std::vector<uint16_t> scales;
    const auto d = round_trip(w, bits, 64, &scales);
    for (std::size_t i = 0; i < w.size(); ++i) {
      const float step = std::fabs(bf16_to_f32(scales[i / 64]));
      // mlx moves the scale so that 0 is exact (scale = edge / rint(edge / scale)): the far extreme
      // may then sit up to about a step outside the grid and be clamped, so one and a half steps,
      // plus the bf16 rounding of the stored scale over up to 2^bits steps. (Byte equality with
      // mlx's own quantize is tests/cli/test_quantize_mlx.py's job.)
      EXPECT_LE(std::fabs(d[i] - w[i]), 1.5f * step + step * std::ldexp(1.0f, bits - 8) + 1e-6f) << "bits " << bits << " i " << i;
    }
  }
}

TEST(MlxAffineQuantize, TheLargerMagnitudeExtremeIsTheBiasAndExact) {
  // mlx: |min| > |max| makes min the bias (q = 0 there) and keeps it exactly; else max is.
  std::vector<float> w(32, 0.25f);
  w[3] = -3.0f;
  w[7] = 1.0f;
  const auto d = round_trip(w, 4, 32);
  EXPECT_EQ(d[3], -3.0f);
  std::vector<float> v(32, -0.25f);
  v[5] = 3.0f;
  EXPECT_EQ(round_trip(v, 4, 32)[5], 3.0f);
  // A constant group: the scale floor 1e-7 and every q the same.
  std::vector<float> c(32, 0.5f);
  for (float x : round_trip(c, 3, 32)) EXPECT_EQ(x, 0.5f);
}

TEST(MlxModuleQuant, MlxLmChoices) {
  MlxQuantizeOptions o;
  o.bits = 4;
  o.group_size = 64;
  EXPECT_FALSE(mlx_module_quant("language_model.model.layers.0.mlp.down_proj", 96, 8, false, o));  // not a multiple of 64: kept
  const auto plain = mlx_module_quant("language_model.model.layers.0.mlp.down_proj", 128, 8, false, o);
  ASSERT_TRUE(plain);
  EXPECT_EQ(plain->spec.bits, 4);
  EXPECT_FALSE(plain->entry);
  const auto router = mlx_module_quant("language_model.model.layers.0.mlp.gate", 128, 8, true, o);
  EXPECT_EQ(router->spec.bits, 8);
  EXPECT_TRUE(router->entry);
  EXPECT_EQ(mlx_module_quant("language_model.model.layers.0.mlp.gate_proj", 128, 8, true, o)->spec.bits, 4);
  o.bits = 3;
  o.recipe = "mixed_3_6";
  // 8 layers: eighth = 1; layers 0 and 7, and (i - 1) % 3 == 2 (3, 6) get more bits.
  for (int64_t i = 0; i < 8; ++i) {
    const bool more = i == 0 || i == 7 || i == 3 || i == 6;
    EXPECT_EQ(mlx_module_quant("language_model.model.layers." + std::to_string(i) + ".mlp.down_proj", 128, 8, false, o)->spec.bits, more ? 6 : 3)
        << i;
    EXPECT_EQ(mlx_module_quant("language_model.model.layers." + std::to_string(i) + ".mlp.up_proj", 128, 8, false, o)->spec.bits, 3) << i;
  }
  EXPECT_EQ(mlx_module_quant("language_model.lm_head", 128, 8, false, o)->spec.bits, 6);
  EXPECT_EQ(mlx_module_quant("language_model.model.embed_tokens", 128, 8, false, o)->spec.bits, 3);
}

TEST(MlxModuleQuant, ImpossibleOptionsAreNamed) {
  auto error = [](MlxQuantizeOptions o) {
    try {
      check_mlx_quantize_options(o);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(error({7, 64, ""}).find("bits = 7"), std::string::npos);
  EXPECT_NE(error({4, 16, ""}).find("group_size = 16"), std::string::npos);
  EXPECT_NE(error({4, 64, "mixed_5_5"}).find("unknown --recipe"), std::string::npos);
  EXPECT_NE(error({4, 64, "mixed_3_6"}).find("--bits 4"), std::string::npos);
  EXPECT_EQ(error({4, 64, "mixed_4_6"}), "");
}

class MlxExport : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("qwenrt_export_" + std::to_string(::getpid()) + "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
  ThreadPool pool_{2};
};

// Every dequantized element of `q` within 1.5 steps of its group (see above) of `dense`'s.
// A matrix whose input width is not a multiple of the group size stays as it was (bf16 here).
void expect_close_rows(const Weight& dense, const Weight& q, const std::string& what, int group_size = 32) {
  ASSERT_EQ(dense.rows, q.rows) << what;
  ASSERT_EQ(dense.cols, q.cols) << what;
  std::vector<float> a(static_cast<std::size_t>(dense.cols)), b(a.size());
  if (dense.cols % group_size != 0) {
    ASSERT_EQ(q.format, dense.format) << what;
    for (int64_t r = 0; r < dense.rows; ++r) {
      dense.row_to_f32(r, a.data());
      q.row_to_f32(r, b.data());
      ASSERT_EQ(a, b) << what << " row " << r;
    }
    return;
  }
  ASSERT_EQ(q.format, WeightFormat::MlxAffine) << what;
  std::vector<float> s(static_cast<std::size_t>(q.cols / q.quant.group_size));
  const Weight scales{q.quant.scale_format, q.rows, q.cols / q.quant.group_size, q.quant.scales};
  for (int64_t r = 0; r < dense.rows; ++r) {
    dense.row_to_f32(r, a.data());
    q.row_to_f32(r, b.data());
    scales.row_to_f32(r, s.data());
    for (int64_t c = 0; c < dense.cols; ++c) {
      const float step = std::fabs(s[static_cast<std::size_t>(c / q.quant.group_size)]);
      ASSERT_LE(std::fabs(a[static_cast<std::size_t>(c)] - b[static_cast<std::size_t>(c)]),
                1.5f * step + step * std::ldexp(1.0f, q.quant.bits - 8) + 1e-7f)
          << what << " row " << r << " col " << c;
    }
  }
}

void expect_same(const ParamVector& a, const ParamVector& b, const std::string& what) { ASSERT_EQ(a.host, b.host) << what; }

// A zero-centred norm: qwenrt folds 1 + w in f32; mlx-lm stores 1 + w in bf16.
void expect_baked_norm(const ParamVector& folded, const ParamVector& baked, const std::string& what) {
  ASSERT_EQ(folded.size(), baked.size()) << what;
  for (std::size_t i = 0; i < folded.size(); ++i) ASSERT_EQ(baked[i], bf16_to_f32(f32_to_bf16(folded[i]))) << what << " " << i;
}

TEST_F(MlxExport, EveryTensorLandsWhereTheLoaderReadsIt) {
  for (const char* fixture : {"vlm", "moe", "moe_per_expert"}) {
    const fs::path src = test::fixtures_dir() / fixture, out = dir_ / fixture;
    CheckpointDir in(src);
    const ModelConfig c = parse_model_config(in.config(), "config.json");
    MlxQuantizeOptions o;
    o.bits = 4;
    o.group_size = 32;
    std::size_t last = 0, total = 0;
    const auto s = export_mlx_affine(in, c, o, out, pool_, [&](std::size_t d, std::size_t t) {
      EXPECT_GE(d, last);
      last = d;
      total = t;
    });
    EXPECT_EQ(last, total) << fixture;
    EXPECT_GT(s.quantized, 0) << fixture;
    const ModelWeights a = bind_weights(c, in);
    CheckpointDir written(out);
    const ModelConfig qc = parse_model_config(written.config(), "config.json");
    EXPECT_TRUE(qc.quantization.present);
    const ModelWeights b = bind_weights(qc, written);
    const std::string f = fixture;
    expect_close_rows(a.embed, b.embed, f + " embed");
    expect_close_rows(a.lm_head, b.lm_head, f + " lm_head");
    expect_baked_norm(a.final_norm, b.final_norm, f + " final norm");
    for (std::size_t i = 0; i < a.layers.size(); ++i) {
      const auto &x = a.layers[i], &y = b.layers[i];
      const std::string l = f + " layer " + std::to_string(i) + " ";
      expect_baked_norm(x.input_norm, y.input_norm, l + "input norm");
      expect_baked_norm(x.post_norm, y.post_norm, l + "post norm");
      if (x.kind == LayerKind::FullAttention) {
        expect_close_rows(x.attn.q_proj, y.attn.q_proj, l + "q_proj");
        expect_close_rows(x.attn.k_proj, y.attn.k_proj, l + "k_proj");
        expect_close_rows(x.attn.v_proj, y.attn.v_proj, l + "v_proj");
        expect_close_rows(x.attn.o_proj, y.attn.o_proj, l + "o_proj");
        expect_baked_norm(x.attn.q_norm, y.attn.q_norm, l + "q_norm");
        expect_baked_norm(x.attn.k_norm, y.attn.k_norm, l + "k_norm");
      } else {
        expect_close_rows(x.gdn.in_qkv, y.gdn.in_qkv, l + "in_qkv");
        expect_close_rows(x.gdn.in_z, y.gdn.in_z, l + "in_z");
        expect_close_rows(x.gdn.in_b, y.gdn.in_b, l + "in_b");
        expect_close_rows(x.gdn.in_a, y.gdn.in_a, l + "in_a");
        expect_close_rows(x.gdn.out_proj, y.gdn.out_proj, l + "out_proj");
        expect_same(x.gdn.conv, y.gdn.conv, l + "conv");
        expect_same(x.gdn.dt_bias, y.gdn.dt_bias, l + "dt_bias");
        expect_same(x.gdn.neg_exp_a, y.gdn.neg_exp_a, l + "A_log");
        expect_same(x.gdn.norm, y.gdn.norm, l + "gated norm");
      }
      if (c.moe) {
        expect_close_rows(x.moe.router, y.moe.router, l + "router");
        EXPECT_EQ(y.moe.router.quant.bits, 8);
        ASSERT_EQ(x.moe.experts.size(), y.moe.experts.size());
        for (std::size_t e = 0; e < x.moe.experts.size(); ++e) {
          expect_close_rows(x.moe.experts[e].gate, y.moe.experts[e].gate, l + "expert " + std::to_string(e) + " gate");
          expect_close_rows(x.moe.experts[e].up, y.moe.experts[e].up, l + "expert " + std::to_string(e) + " up");
          expect_close_rows(x.moe.experts[e].down, y.moe.experts[e].down, l + "expert " + std::to_string(e) + " down");
        }
        expect_close_rows(x.moe.shared.gate, y.moe.shared.gate, l + "shared gate");
        expect_close_rows(x.moe.shared.down, y.moe.shared.down, l + "shared down");
      } else {
        expect_close_rows(x.mlp.gate, y.mlp.gate, l + "gate");
        expect_close_rows(x.mlp.up, y.mlp.up, l + "up");
        expect_close_rows(x.mlp.down, y.mlp.down, l + "down");
      }
    }
  }
}

TEST_F(MlxExport, RefusesANonEmptyOutputAndQuantizedInput) {
  fs::create_directories(dir_);
  {
    std::FILE* f = std::fopen((dir_ / "keep").c_str(), "w");
    std::fclose(f);
  }
  CheckpointDir in(test::fixtures_dir() / "dense_tied");
  const ModelConfig c = parse_model_config(in.config(), "config.json");
  EXPECT_THROW(export_mlx_affine(in, c, {}, dir_, pool_, nullptr), Error);
  CheckpointDir q(test::fixtures_dir() / "mlx_q4_g64");
  EXPECT_THROW(export_mlx_affine(q, parse_model_config(q.config(), "config.json"), {}, dir_ / "new", pool_, nullptr), Error);
}

}  // namespace
}  // namespace qwenrt
