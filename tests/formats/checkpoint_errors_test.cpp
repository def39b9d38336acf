// Broken checkpoints: every inconsistency is an Error naming the file, the tensor and the problem.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <limits>

#include "core/error.h"
#include "core/mapped_file.h"
#include "formats/json_file.h"
#include "formats/safetensors.h"
#include "model/qwen35_model.h"
#include "support/fixtures.h"
#include "support/safetensors_writer.h"

namespace qwenrt {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

class BrokenCheckpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("qwenrt_broken_" + std::to_string(::getpid()) + "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    const fs::path src = test::fixtures_dir() / "dense_untied";
    ASSERT_TRUE(fs::exists(src / "model.safetensors")) << "fixture dense_untied missing";
    fs::copy_file(src / "config.json", dir_ / "config.json");
    MappedFile f(src / "model.safetensors");
    for (const auto& t : parse_safetensors(f.bytes(), "src")) {
      const auto* b = reinterpret_cast<const uint8_t*>(t.data);
      specs_.push_back({t.name, std::string(dtype_name(t.dtype)), t.shape, std::vector<uint8_t>(b, b + t.nbytes)});
    }
    config_ = read_json_file(dir_ / "config.json");
  }
  void TearDown() override { fs::remove_all(dir_); }

  void write_weights() { test::write_file(dir_ / "model.safetensors", test::safetensors_image(specs_)); }
  void write_config() { test::write_text(dir_ / "config.json", config_.dump()); }
  test::TensorSpec& spec(const std::string& suffix) {
    for (auto& s : specs_)
      if (s.name.size() >= suffix.size() && s.name.compare(s.name.size() - suffix.size(), suffix.size(), suffix) == 0) return s;
    throw std::runtime_error("no tensor ending in " + suffix);
  }
  json& text_config() { return config_.contains("text_config") ? config_["text_config"] : config_; }

  // Loads and returns the error message ("" if loading succeeded).
  std::string load_error() {
    try {
      Qwen35Model::load(dir_);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }

  fs::path dir_;
  std::vector<test::TensorSpec> specs_;
  json config_;
};

#define EXPECT_ERROR_HAS(msg, ...)                                                                                                    \
  do {                                                                                                                                \
    const std::string m_ = (msg);                                                                                                     \
    for (const char* part : {__VA_ARGS__}) EXPECT_NE(m_.find(part), std::string::npos) << "message: " << m_ << "\nmissing: " << part; \
  } while (0)

TEST_F(BrokenCheckpoint, IntactCopyLoads) {
  write_weights();
  EXPECT_EQ(load_error(), "");
}

TEST_F(BrokenCheckpoint, MissingTensor) {
  std::string name = spec("layers.1.mlp.down_proj.weight").name;
  std::erase_if(specs_, [&](const auto& s) { return s.name == name; });
  write_weights();
  EXPECT_ERROR_HAS(load_error(), "missing tensor", name.c_str());
}

TEST_F(BrokenCheckpoint, ExtraTensor) {
  specs_.push_back({"model.layers.0.mlp.bonus.weight", "F32", {2}, std::vector<uint8_t>(8, 0)});
  write_weights();
  EXPECT_ERROR_HAS(load_error(), "unexpected tensor", "model.layers.0.mlp.bonus.weight", "model.safetensors");
}

TEST_F(BrokenCheckpoint, WrongShape) {
  auto& s = spec("layers.0.mlp.gate_proj.weight");
  std::swap(s.shape[0], s.shape[1]);
  write_weights();
  EXPECT_ERROR_HAS(load_error(), "has shape", s.name.c_str(), "expected");
}

TEST_F(BrokenCheckpoint, WrongDtype) {
  auto& s = spec("layers.0.mlp.up_proj.weight");
  s.dtype = "I16";
  write_weights();
  EXPECT_ERROR_HAS(load_error(), "dtype I16", s.name.c_str());
}

TEST_F(BrokenCheckpoint, TruncatedFile) {
  auto img = test::safetensors_image(specs_);
  img.resize(img.size() - 100);
  test::write_file(dir_ / "model.safetensors", img);
  EXPECT_ERROR_HAS(load_error(), "model.safetensors", "runs past the end");
}

TEST_F(BrokenCheckpoint, NonFiniteNormWeight) {
  auto& s = spec("model.norm.weight");
  for (std::size_t i = 0; i + 1 < s.bytes.size(); i += 2) s.bytes[i] = 0x80, s.bytes[i + 1] = 0x7f;  // bf16 +inf
  if (s.dtype == "F32") GTEST_SKIP();
  write_weights();
  EXPECT_ERROR_HAS(load_error(), "non-finite", "model.norm.weight");
}

TEST_F(BrokenCheckpoint, TieMismatch) {
  write_weights();
  text_config()["tie_word_embeddings"] = true;
  write_config();
  EXPECT_ERROR_HAS(load_error(), "tie_word_embeddings=true", "lm_head.weight");
}

TEST_F(BrokenCheckpoint, AbsurdConfigValues) {
  write_weights();
  const json original = config_;
  struct Case {
    const char* field;
    json value;
    const char* expect;
  };
  for (const Case& c :
       {Case{"hidden_size", -4, "hidden_size"}, Case{"num_hidden_layers", 100000, "num_hidden_layers"}, Case{"vocab_size", "many", "vocab_size"},
        Case{"linear_num_value_heads", 3, "multiple"}, Case{"layer_types", json::array({"full_attention"}), "layer_types"},
        Case{"model_type", "llama", "not supported"}, Case{"hidden_act", "gelu", "hidden_act"}, Case{"rms_norm_eps", 5.0, "rms_norm_eps"}}) {
    config_ = original;
    text_config()[c.field] = c.value;
    write_config();
    EXPECT_ERROR_HAS(load_error(), "config.json", c.expect);
  }
  config_ = original;
  text_config().erase("num_attention_heads");
  write_config();
  EXPECT_ERROR_HAS(load_error(), "missing field 'num_attention_heads'");
}

TEST_F(BrokenCheckpoint, ShardIndexProblems) {
  // Two shards with an index; then break the index in several ways.
  std::vector<test::TensorSpec> a(specs_.begin(), specs_.begin() + static_cast<long>(specs_.size() / 2));
  std::vector<test::TensorSpec> b(specs_.begin() + static_cast<long>(specs_.size() / 2), specs_.end());
  test::write_file(dir_ / "model-00001-of-00002.safetensors", test::safetensors_image(a));
  test::write_file(dir_ / "model-00002-of-00002.safetensors", test::safetensors_image(b));
  json index;
  for (const auto& s : a) index["weight_map"][s.name] = "model-00001-of-00002.safetensors";
  for (const auto& s : b) index["weight_map"][s.name] = "model-00002-of-00002.safetensors";
  test::write_text(dir_ / "model.safetensors.index.json", index.dump());
  EXPECT_EQ(load_error(), "");

  json wrong = index;
  wrong["weight_map"][a[0].name] = "model-00002-of-00002.safetensors";
  test::write_text(dir_ / "model.safetensors.index.json", wrong.dump());
  EXPECT_ERROR_HAS(load_error(), a[0].name.c_str(), "model-00001-of-00002.safetensors");

  test::write_text(dir_ / "model.safetensors.index.json", index.dump());
  fs::remove(dir_ / "model-00002-of-00002.safetensors");
  EXPECT_ERROR_HAS(load_error(), "shard model-00002-of-00002.safetensors is missing");

  json evil = index;
  evil["weight_map"][a[0].name] = "../etc/passwd";
  test::write_text(dir_ / "model.safetensors.index.json", evil.dump());
  EXPECT_ERROR_HAS(load_error(), "invalid file");

  test::write_text(dir_ / "model.safetensors.index.json", "{\"weight_map\": [}");
  EXPECT_ERROR_HAS(load_error(), "model.safetensors.index.json", "invalid JSON");
}

TEST_F(BrokenCheckpoint, MissingFilesAndDirectory) {
  EXPECT_ERROR_HAS(load_error(), "no model.safetensors");
  fs::remove(dir_ / "config.json");
  EXPECT_ERROR_HAS(load_error(), "no config.json");
  fs::remove_all(dir_);
  EXPECT_ERROR_HAS(load_error(), "not a checkpoint directory");
}

TEST_F(BrokenCheckpoint, OverlappingTensorData) {
  auto img = test::safetensors_image(specs_);
  // Point the second tensor's range at the first one's bytes by rewriting the header.
  uint64_t hlen = 0;
  for (int i = 7; i >= 0; --i) hlen = hlen << 8 | img[i];
  json h = json::parse(std::string(img.begin() + 8, img.begin() + 8 + static_cast<long>(hlen)));
  std::string first = specs_[0].name, second = specs_[1].name;
  auto r1 = h[first]["data_offsets"], r2 = h[second]["data_offsets"];
  if (specs_[0].bytes.size() == specs_[1].bytes.size()) {
    h[second]["data_offsets"] = r1;
    std::string hs = h.dump();
    hs.resize(hlen, ' ');
    ASSERT_EQ(hs.size(), hlen);
    std::copy(hs.begin(), hs.end(), img.begin() + 8);
    test::write_file(dir_ / "model.safetensors", img);
    EXPECT_ERROR_HAS(load_error(), "overlapping");
  }
}

// A_log so large that −exp(A_log) overflows f32: an error at load naming the tensor, not NaN
// logits later.
TEST_F(BrokenCheckpoint, OverflowingALog) {
  auto& s = spec("linear_attn.A_log");
  ASSERT_EQ(s.dtype, "F32");
  const float big = 100.0f;
  std::memcpy(s.bytes.data(), &big, 4);
  write_weights();
  EXPECT_ERROR_HAS(load_error(), s.name.c_str(), "A_log", "overflow f32");
}

// A NaN in a weight matrix stops the first step that reads it, naming the layer, instead of giving
// garbage tokens with exit code 0.
TEST_F(BrokenCheckpoint, NonFiniteMatrixStopsTheStepNamingTheLayer) {
  auto& s = spec("layers.2.mlp.down_proj.weight");
  ASSERT_TRUE(s.dtype == "BF16" || s.dtype == "F32" || s.dtype == "F16") << s.dtype;
  if (s.dtype == "F32") {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    std::memcpy(s.bytes.data() + 40, &nan, 4);
  } else {
    s.bytes[40] = 0xC1, s.bytes[41] = s.dtype == "BF16" ? 0x7F : 0x7E;  // bf16 / f16 NaN
  }
  write_weights();
  ASSERT_EQ(load_error(), "");
  const auto model = Qwen35Model::load(dir_);
  ModelCache cache = model.new_cache(1);
  const int slot = cache.acquire();
  ThreadPool pool(1);
  try {
    model.forward({Phase::Window, {{slot, {1, 2, 3}}}, false}, cache, pool);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_ERROR_HAS(e.what(), "non-finite values in layer 2", "sequence slot 0", "qwenrt info --check");
  }
}

}  // namespace
}  // namespace qwenrt
