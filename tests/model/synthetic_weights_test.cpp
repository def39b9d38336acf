// Synthetic quantized weights made on a device at upload (no host data, only a seed and the
// format's parameters) have the layout of the host-made ones: the same formats, shapes, bits,
// groups, blocks and bytes, so `bench --device cuda --quant` streams what `--device cpu` does and
// its decode floor counts the same packed bytes.
#include <gtest/gtest.h>

#include <filesystem>

#include "formats/json_file.h"
#include "model/config.h"
#include "model/released_shapes.h"
#include "model/weights.h"
#include "support/fixtures.h"

namespace qwenrt {
namespace {

void expect_same_layout(const Weight& host, const Weight& dev, const std::string& what) {
  EXPECT_EQ(host.format, dev.format) << what;
  EXPECT_EQ(host.rows, dev.rows) << what;
  EXPECT_EQ(host.cols, dev.cols) << what;
  EXPECT_EQ(host.bytes(), dev.bytes()) << what;
  if (host.format == WeightFormat::MlxAffine) {
    EXPECT_EQ(host.quant.bits, dev.quant.bits) << what;
    EXPECT_EQ(host.quant.group_size, dev.quant.group_size) << what;
    EXPECT_EQ(host.quant.scale_format, dev.quant.scale_format) << what;
  }
  if (host.format == WeightFormat::Fp8Block) {
    EXPECT_EQ(host.fp8.block_rows, dev.fp8.block_rows) << what;
    EXPECT_EQ(host.fp8.block_cols, dev.fp8.block_cols) << what;
    EXPECT_EQ(host.fp8.scale_cols, dev.fp8.scale_cols) << what;
    EXPECT_EQ(host.fp8.scale_format, dev.fp8.scale_format) << what;
  }
  EXPECT_EQ(dev.data, nullptr) << what;
  EXPECT_NE(dev.random_seed, 0u) << what;
}

TEST(SyntheticWeights, DeviceMadeQuantizedWeightsHaveTheHostLayout) {
  const auto dir = test::fixtures_dir().parent_path().parent_path() / "models" / "qwen35-demo-16m";
  if (!std::filesystem::exists(dir / "config.json")) GTEST_SKIP() << "no demo model";
  const ModelConfig c = parse_model_config(read_json_file(dir / "config.json"), "demo");
  for (SyntheticFormat f : {SyntheticFormat::MlxQ4, SyntheticFormat::MlxQ8, SyntheticFormat::Fp8}) {
    const ModelWeights host = synthetic_weights(c, 5, true, f), dev = synthetic_weights(c, 5, false, f);
    EXPECT_EQ(host.matrix_bytes(), dev.matrix_bytes());
    expect_same_layout(host.embed, dev.embed, "embed");
    expect_same_layout(host.lm_head, dev.lm_head, "lm_head");
    int quantized = 0;
    for (std::size_t i = 0; i < host.layers.size(); ++i) {
      const LayerWeights &h = host.layers[i], &d = dev.layers[i];
      const std::string at = "layer " + std::to_string(i);
      for (auto [hw, dw] : {std::pair{&h.attn.q_proj, &d.attn.q_proj},
                            {&h.attn.o_proj, &d.attn.o_proj},
                            {&h.gdn.in_qkv, &d.gdn.in_qkv},
                            {&h.gdn.in_b, &d.gdn.in_b},
                            {&h.gdn.out_proj, &d.gdn.out_proj},
                            {&h.mlp.gate, &d.mlp.gate},
                            {&h.mlp.down, &d.mlp.down}}) {
        if (hw->rows == 0) continue;
        expect_same_layout(*hw, *dw, at);
        quantized += hw->quantized();
      }
    }
    EXPECT_GT(quantized, 0);
  }
}

// Each synthetic shape has about the parameters its name says (the text model: the vision tower the
// small releases count is not built), so a mistyped layer count or FFN size shows here.
TEST(SyntheticWeights, ReleasedShapesHaveTheParametersTheirNamesSay) {
  for (const std::string& name : released_shape_names()) {
    const std::string size = name.rfind("next-", 0) == 0 ? name.substr(5) : name;
    const double nominal = std::stod(size.substr(0, size.find('b'))) * 1e9;
    const ModelWeights w = synthetic_weights(released_shape(name), 1, /*host_matrices=*/false);
    const double params = static_cast<double>(w.matrix_bytes()) / 2;  // bf16
    EXPECT_GT(params, 0.85 * nominal) << name << ": " << params;
    EXPECT_LT(params, 1.1 * nominal) << name << ": " << params;
  }
}

}  // namespace
}  // namespace qwenrt
