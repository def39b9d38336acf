#pragma once
// A copy of a committed fixture in a fresh temporary folder, for tests that break its files one at a
// time and check the load error (the quantized formats' error tests).
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#include "formats/checkpoint_dir.h"
#include "formats/json_file.h"
#include "formats/safetensors.h"
#include "model/config.h"
#include "model/weights.h"
#include "support/fixtures.h"
#include "support/safetensors_writer.h"

namespace qwenrt::test {

class BrokenFixture : public ::testing::Test {
 protected:
  explicit BrokenFixture(std::string fixture) : fixture_(std::move(fixture)) {}
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("qwenrt_broken_" + fixture_ + "_" + std::to_string(::getpid()) + "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    const std::filesystem::path src = fixtures_dir() / fixture_;
    for (const char* f : {"config.json", "model.safetensors", "generation_config.json"}) std::filesystem::copy_file(src / f, dir_ / f);
    config_ = read_json_file(dir_ / "config.json");
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  void write_config() { write_text(dir_ / "config.json", config_.dump()); }
  // Rewrites the weights with `edit` applied to the tensor list.
  template <typename Edit>
  void rewrite(Edit edit) {
    std::vector<TensorSpec> specs;
    {
      SafetensorsFile f(dir_ / "model.safetensors");
      for (const auto& t : f.tensors()) {
        const auto* b = reinterpret_cast<const uint8_t*>(t.data);
        specs.push_back({t.name, std::string(dtype_name(t.dtype)), t.shape, std::vector<uint8_t>(b, b + t.nbytes)});
      }
    }
    edit(specs);
    write_file(dir_ / "model.safetensors", safetensors_image(specs));
  }
  // Loads the weights and returns the error message ("" if they loaded).
  std::string load_error() {
    try {
      CheckpointDir ckpt(dir_);
      bind_weights(parse_model_config(ckpt.config(), "config.json"), ckpt);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }

  std::string fixture_;
  std::filesystem::path dir_;
  nlohmann::json config_;
};

}  // namespace qwenrt::test
