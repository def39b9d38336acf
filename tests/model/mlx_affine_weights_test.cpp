// MLX affine checkpoints written by mlx-lm (tools/make_quant_fixtures.py): qwenrt's dequantized rows
// equal mlx.core.dequantize's bit for bit, and inconsistent inputs are clear errors naming the
// tensor. (Logits, greedy tokens and batching are checked by parity_test.cpp on the same fixtures.)
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"
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

std::vector<std::string> quant_fixtures() {
  std::vector<std::string> out;
  for (const auto& n : test::fixture_names())
    if (n.rfind("mlx_", 0) == 0) out.push_back(n);
  return out;
}

class MlxAffineFixture : public ::testing::TestWithParam<std::string> {};

// The matrices a dequant_<module>.npy sample was taken from (module as mlx-lm names it, without
// "language_model.model."), in row order: a switch_mlp stack is every expert's rows in turn.
std::vector<const Weight*> sample_matrices(const ModelWeights& w, const std::string& module) {
  if (module == "embed_tokens") return {&w.embed};
  if (module == "lm_head") return {&w.lm_head};
  std::size_t layer = 0, used = 0;
  if (module.rfind("layers.", 0) == 0) layer = std::stoul(module.substr(7), &used);
  const std::string rest = module.substr(7 + used);
  if (layer >= w.layers.size()) return {};
  const LayerWeights& l = w.layers[layer];
  if (rest == ".mlp.down_proj") return {&l.mlp.down};
  if (rest == ".mlp.gate") return {&l.moe.router};
  if (rest == ".mlp.switch_mlp.down_proj") {
    std::vector<const Weight*> out;
    for (const auto& e : l.moe.experts) out.push_back(&e.down);
    return out;
  }
  return {};
}

TEST_P(MlxAffineFixture, DequantizedRowsEqualMlxBitForBit) {
  const fs::path dir = test::fixtures_dir() / GetParam();
  CheckpointDir ckpt(dir);
  const ModelConfig c = parse_model_config(ckpt.config(), "config.json");
  ASSERT_TRUE(c.quantization.present);
  const ModelWeights w = bind_weights(c, ckpt);
  ASSERT_EQ(w.embed.format, WeightFormat::MlxAffine);
  if (c.tie_word_embeddings) EXPECT_EQ(w.lm_head.data, w.embed.data);  // tied quantized head
  else EXPECT_NE(w.lm_head.data, w.embed.data);
  int samples = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string file = entry.path().filename().string();
    if (file.rfind("dequant_", 0) != 0) continue;
    const std::string module = file.substr(8, file.size() - 8 - 4);
    const auto parts = sample_matrices(w, module);
    ASSERT_FALSE(parts.empty()) << "no matrix for " << file;
    const auto ref = read_npy(entry.path());
    const int64_t cols = parts[0]->cols;
    ASSERT_EQ(ref.shape.back(), cols) << file;
    std::vector<float> row(static_cast<std::size_t>(cols));
    std::size_t at = 0;
    for (const Weight* m : parts) {
      ASSERT_EQ(m->format, WeightFormat::MlxAffine) << file;
      for (int64_t r = 0; r < m->rows; ++r) {
        m->row_to_f32(r, row.data());
        for (int64_t col = 0; col < cols; ++col, ++at) {
          ASSERT_LT(at, ref.values.size()) << file;
          ASSERT_EQ(row[static_cast<std::size_t>(col)], static_cast<float>(ref.values[at])) << file << " row " << r << " col " << col;
        }
      }
    }
    EXPECT_EQ(at, ref.values.size()) << file;
    ++samples;
  }
  EXPECT_EQ(samples, 2);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, MlxAffineFixture, ::testing::ValuesIn(quant_fixtures()), [](const auto& info) { return info.param; });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(MlxAffineFixture);

TEST(MlxAffineFixtures, AllRecipesAreThere) {
  for (const char* n : {"mlx_q4_g64", "mlx_q8_g32", "mlx_q3_g64", "mlx_mixed_3_6", "mlx_untied_q5_g32", "mlx_moe_q4_g64"})
    EXPECT_TRUE(fs::exists(test::fixtures_dir() / n / "reference.json")) << n;
}

TEST(MlxAffineFixtures, MixedRecipeHasPerModuleBits) {
  CheckpointDir ckpt(test::fixtures_dir() / "mlx_mixed_3_6");
  const ModelConfig c = parse_model_config(ckpt.config(), "config.json");
  const ModelWeights w = bind_weights(c, ckpt);
  EXPECT_EQ(w.layers[3].mlp.down.quant.bits, 6);  // sensitive layers (mlx-lm: i >= 7n/8 or (i - n/8) % 3 == 2)
  EXPECT_EQ(w.layers[2].mlp.down.quant.bits, 6);
  EXPECT_EQ(w.layers[1].mlp.down.quant.bits, 3);
  EXPECT_EQ(w.layers[1].mlp.gate.quant.bits, 3);
}

// A copy of the 4-bit fixture to break, one file at a time.
class MlxAffineErrors : public test::BrokenFixture {
 protected:
  MlxAffineErrors() : BrokenFixture("mlx_q4_g64") {}
};

TEST(MlxAffineFixtures, MoeKeepsTheRouterAtEightBitsAndStacksExperts) {
  CheckpointDir ckpt(test::fixtures_dir() / "mlx_moe_q4_g64");
  const ModelConfig c = parse_model_config(ckpt.config(), "config.json");
  const ModelWeights w = bind_weights(c, ckpt);
  const auto& moe = w.layers[1].moe;
  EXPECT_EQ(moe.router.quant.bits, 8);
  EXPECT_EQ(moe.shared_gate.quant.bits, 8);
  ASSERT_EQ(moe.experts.size(), 8u);
  EXPECT_EQ(moe.experts[3].gate.quant.bits, 4);
  EXPECT_EQ(moe.experts[3].gate.format, WeightFormat::MlxAffine);
}

TEST_F(MlxAffineErrors, TheCopyLoads) { EXPECT_EQ(load_error(), ""); }

TEST_F(MlxAffineErrors, UnknownModeIsNamed) {
  config_["quantization"]["mode"] = "mxfp4";
  write_config();
  const std::string e = load_error();
  EXPECT_NE(e.find("mxfp4"), std::string::npos) << e;
}

TEST_F(MlxAffineErrors, WrongBitsIsAWordCountErrorNamingTheTensor) {
  config_["quantization"]["bits"] = 8;
  config_.erase("quantization_config");
  write_config();
  const std::string e = load_error();
  EXPECT_NE(e.find("uint32 words per row"), std::string::npos) << e;
  EXPECT_NE(e.find("embed_tokens.weight"), std::string::npos) << e;
}

TEST_F(MlxAffineErrors, UnsupportedBitsAreNamed) {
  config_["quantization"]["bits"] = 7;
  write_config();
  EXPECT_NE(load_error().find("bits = 7"), std::string::npos) << load_error();
}

TEST_F(MlxAffineErrors, MissingQuantizationConfig) {
  config_.erase("quantization");
  config_.erase("quantization_config");
  write_config();
  EXPECT_NE(load_error().find("no \"quantization\""), std::string::npos) << load_error();
}

TEST_F(MlxAffineErrors, ModuleMarkedFalseButQuantized) {
  config_["quantization"]["language_model.model.layers.0.mlp.up_proj"] = false;
  write_config();
  const std::string e = load_error();
  EXPECT_NE(e.find("language_model.model.layers.0.mlp.up_proj"), std::string::npos) << e;
  EXPECT_NE(e.find("not quantized"), std::string::npos) << e;
}

TEST_F(MlxAffineErrors, OtherQuantMethodIsNamed) {
  config_.erase("quantization");
  config_["quantization_config"] = {{"quant_method", "gptq"}};
  write_config();
  EXPECT_NE(load_error().find("gptq"), std::string::npos) << load_error();
}

TEST_F(MlxAffineErrors, MissingScalesNamesTheTensor) {
  rewrite([](auto& specs) { std::erase_if(specs, [](const auto& t) { return t.name == "language_model.model.layers.1.mlp.gate_proj.scales"; }); });
  const std::string e = load_error();
  EXPECT_NE(e.find("language_model.model.layers.1.mlp.gate_proj"), std::string::npos) << e;
  EXPECT_NE(e.find("scales' is missing"), std::string::npos) << e;
}

TEST_F(MlxAffineErrors, MissingBiasesNamesTheTensor) {
  rewrite([](auto& specs) { std::erase_if(specs, [](const auto& t) { return t.name == "language_model.model.layers.1.mlp.gate_proj.biases"; }); });
  const std::string e = load_error();
  EXPECT_NE(e.find("language_model.model.layers.1.mlp.gate_proj.biases"), std::string::npos) << e;
}

TEST_F(MlxAffineErrors, WrongScaleShapeNamesTheTensor) {
  rewrite([](auto& specs) {
    for (auto& t : specs)
      if (t.name == "language_model.model.layers.2.mlp.down_proj.scales") {
        t.shape.back() *= 2;
        t.bytes.resize(t.bytes.size() * 2);
      }
  });
  const std::string e = load_error();
  EXPECT_NE(e.find("language_model.model.layers.2.mlp.down_proj.scales"), std::string::npos) << e;
  EXPECT_NE(e.find("has shape"), std::string::npos) << e;
}

}  // namespace
}  // namespace qwenrt
