// Block FP8 checkpoints as Qwen releases them (tools/make_fp8_fixtures.py): qwenrt's dequantized rows
// equal the script's torch dequantization bit for bit, the modules Qwen keeps in bf16 stay dense, and
// inconsistent inputs are clear errors naming the tensor. (Logits, greedy tokens and batching are
// checked by parity_test.cpp on the same fixtures.)
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "core/half.h"
#include "formats/checkpoint_dir.h"
#include "formats/json_file.h"
#include "formats/npy.h"
#include "formats/safetensors.h"
#include "model/config.h"
#include "model/weights.h"
#include "support/broken_fixture.h"
#include "support/fixtures.h"
#include "support/safetensors_writer.h"

namespace qwenrt {
namespace {

namespace fs = std::filesystem;

void expect_rows_equal(const fs::path& npy, const Weight& m) {
  ASSERT_EQ(m.format, WeightFormat::Fp8Block) << npy;
  const auto ref = read_npy(npy);
  ASSERT_EQ(ref.shape, (std::vector<int64_t>{m.rows, m.cols})) << npy;
  std::vector<float> row(static_cast<std::size_t>(m.cols));
  for (int64_t r = 0; r < m.rows; ++r) {
    m.row_to_f32(r, row.data());
    for (int64_t c = 0; c < m.cols; ++c)
      ASSERT_EQ(row[static_cast<std::size_t>(c)], static_cast<float>(ref.values[static_cast<std::size_t>(r * m.cols + c)]))
          << npy.filename() << " row " << r << " col " << c;
  }
}

TEST(Fp8Fixtures, DenseDequantizesAsTheScriptAndKeepsQwensBf16Modules) {
  const fs::path dir = test::fixtures_dir() / "fp8_dense";
  CheckpointDir ckpt(dir);
  const ModelConfig c = parse_model_config(ckpt.config(), "config.json");
  ASSERT_TRUE(c.quantization.fp8.present);
  EXPECT_FALSE(c.quantization.present);
  EXPECT_EQ(c.quantization.fp8.block_rows, 128);
  const ModelWeights w = bind_weights(c, ckpt);
  expect_rows_equal(dir / "dequant_layers.0.linear_attn.in_proj_qkv.npy", w.layers[0].gdn.in_qkv);
  expect_rows_equal(dir / "dequant_layers.3.mlp.down_proj.npy", w.layers[3].mlp.down);
  EXPECT_EQ(w.layers[0].gdn.in_qkv.fp8.scale_format, WeightFormat::BF16);
  EXPECT_EQ(w.embed.format, WeightFormat::BF16);
  EXPECT_EQ(w.lm_head.format, WeightFormat::BF16);
  EXPECT_EQ(w.layers[1].gdn.in_b.format, WeightFormat::BF16);
  EXPECT_EQ(w.layers[1].gdn.in_z.format, WeightFormat::Fp8Block);
  EXPECT_EQ(w.layers[3].attn.o_proj.format, WeightFormat::Fp8Block);
}

TEST(Fp8Fixtures, MoeDequantizesAsTheScript) {
  const fs::path dir = test::fixtures_dir() / "fp8_moe";
  CheckpointDir ckpt(dir);
  const ModelConfig c = parse_model_config(ckpt.config(), "config.json");
  EXPECT_EQ(c.quantization.fp8.block_rows, 32);
  EXPECT_EQ(c.quantization.fp8.block_cols, 64);
  const ModelWeights w = bind_weights(c, ckpt);
  expect_rows_equal(dir / "dequant_layers.1.mlp.experts.5.down_proj.npy", w.layers[1].moe.experts[5].down);
  expect_rows_equal(dir / "dequant_layers.3.self_attn.q_proj.npy", w.layers[3].attn.q_proj);
  EXPECT_EQ(w.layers[1].moe.experts[5].down.fp8.scale_format, WeightFormat::F32);
  EXPECT_EQ(w.layers[1].moe.router.format, WeightFormat::BF16);
  EXPECT_EQ(w.layers[1].moe.shared_gate.format, WeightFormat::BF16);
  EXPECT_EQ(w.layers[1].moe.shared.up.format, WeightFormat::Fp8Block);
}

TEST(Fp8Config, NotConvertedMatchesAsTransformersDoes) {
  Fp8Config f;
  f.modules_to_not_convert = {"lm_head", "model.layers.0.mlp.gate", "in_proj_a", "model.visual"};
  EXPECT_TRUE(f.not_converted("lm_head"));
  EXPECT_TRUE(f.not_converted("model.layers.0.mlp.gate"));
  EXPECT_FALSE(f.not_converted("model.layers.0.mlp.gate_proj"));
  EXPECT_TRUE(f.not_converted("model.layers.7.linear_attn.in_proj_a"));
  EXPECT_TRUE(f.not_converted("model.visual.blocks.0.attn.qkv"));
  EXPECT_FALSE(f.not_converted("model.layers.7.linear_attn.in_proj_b"));
}

// A copy of the MoE fixture to break, one file at a time.
class Fp8Errors : public test::BrokenFixture {
 protected:
  Fp8Errors() : BrokenFixture("fp8_moe") {}
  test::TensorSpec* find(std::vector<test::TensorSpec>& specs, const std::string& name) {
    for (auto& t : specs)
      if (t.name == name) return &t;
    ADD_FAILURE() << "no tensor " << name;
    return nullptr;
  }
  void expect_error(const std::vector<std::string>& parts) {
    const std::string e = load_error();
    ASSERT_FALSE(e.empty()) << "loaded without error";
    for (const auto& p : parts) EXPECT_NE(e.find(p), std::string::npos) << "'" << p << "' not in: " << e;
  }
};

const std::string kExpertUp = "model.layers.1.mlp.experts.2.up_proj";

TEST_F(Fp8Errors, TheCopyLoads) { EXPECT_EQ(load_error(), ""); }

TEST_F(Fp8Errors, AnE4m3WeightWithoutItsScaleNamesTheTensor) {
  rewrite([](auto& specs) { std::erase_if(specs, [](const auto& t) { return t.name == kExpertUp + ".weight_scale_inv"; }); });
  expect_error({kExpertUp + ".weight", "F8_E4M3", "weight_scale_inv' is missing"});
}

TEST_F(Fp8Errors, AScaleBesideABf16WeightIsAnError) {
  rewrite([&](auto& specs) {
    specs.push_back({"model.layers.0.mlp.gate.weight_scale_inv", "BF16", {1, 1}, {0x80, 0x3f}});  // router kept in bf16
  });
  expect_error({"model.layers.0.mlp.gate.weight", "dtype BF16"});
}

TEST_F(Fp8Errors, WrongScaleShapeNamesTheTensor) {
  rewrite([&](auto& specs) {
    auto* t = find(specs, kExpertUp + ".weight_scale_inv");
    t->shape[1] += 1;
    t->bytes.resize(static_cast<std::size_t>(t->shape[0] * t->shape[1] * 4));
  });
  expect_error({kExpertUp + ".weight_scale_inv", "has shape", "expected"});
}

TEST_F(Fp8Errors, BlockSizeThatDisagreesWithTheScalesIsAShapeError) {
  config_["quantization_config"]["weight_block_size"] = {64, 64};
  write_config();
  expect_error({"weight_scale_inv", "64x64"});
}

TEST_F(Fp8Errors, ModuleListedAsNotConvertedButFp8) {
  config_["quantization_config"]["modules_to_not_convert"].push_back(kExpertUp);
  write_config();
  expect_error({kExpertUp, "modules_to_not_convert"});
}

TEST_F(Fp8Errors, Fp8WeightsWithoutTheConfig) {
  config_.erase("quantization_config");
  write_config();
  expect_error({"quant_method", "fp8"});
}

TEST_F(Fp8Errors, UnsupportedConfigValuesAreNamed) {
  config_["quantization_config"]["fmt"] = "e5m2";
  write_config();
  expect_error({"e5m2"});
  config_["quantization_config"]["fmt"] = "e4m3";
  config_["quantization_config"]["activation_scheme"] = "static";
  write_config();
  expect_error({"static"});
  config_["quantization_config"]["activation_scheme"] = "dynamic";
  config_["quantization_config"]["weight_block_size"] = {128, 100};
  write_config();
  expect_error({"weight_block_size", "multiple of 8"});
}

TEST_F(Fp8Errors, NonFiniteScaleNamesTheTensor) {
  rewrite([&](auto& specs) {
    auto* t = find(specs, kExpertUp + ".weight_scale_inv");
    const float inf = std::numeric_limits<float>::infinity();
    std::memcpy(t->bytes.data(), &inf, 4);
  });
  expect_error({kExpertUp + ".weight_scale_inv", "finite"});
}

TEST_F(Fp8Errors, E5m2WeightsAreRefused) {
  rewrite([&](auto& specs) { find(specs, kExpertUp + ".weight")->dtype = "F8_E5M2"; });
  expect_error({kExpertUp + ".weight", "F8_E5M2"});
}

}  // namespace
}  // namespace qwenrt
