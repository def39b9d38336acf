#pragma once
// Steps that meet a NaN weight, on any device: copies of the released_heads fixture with one value
// poisoned, and the errors their steps raise (the non-finite check names where it first appeared,
// the sequence and the position). Shared by the CPU suite and the GPU suite (each binds a device).
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "backend/device.h"
#include "core/error.h"
#include "core/mapped_file.h"
#include "engine/step_queue.h"
#include "formats/safetensors.h"
#include "model/qwen35_model.h"
#include "support/fixtures.h"
#include "support/safetensors_writer.h"

namespace qwenrt::test {

// A copy of the released_heads fixture (its shapes run on every backend) whose tensor ending in
// `suffix` holds NaN at [row, col], in a fresh directory named after `tag`.
inline std::filesystem::path poisoned_copy(const std::string& tag, const std::string& suffix, int64_t row, int64_t col) {
  namespace fs = std::filesystem;
  const fs::path src = fixtures_dir() / "released_heads";
  const fs::path dir = fs::temp_directory_path() / ("qwenrt_poisoned_" + std::to_string(::getpid()) + "_" + tag);
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::copy_file(src / "config.json", dir / "config.json");
  std::vector<TensorSpec> specs;
  bool found = false;
  MappedFile f(src / "model.safetensors");
  for (const auto& t : parse_safetensors(f.bytes(), "released_heads")) {
    const auto* b = reinterpret_cast<const uint8_t*>(t.data);
    specs.push_back({t.name, std::string(dtype_name(t.dtype)), t.shape, std::vector<uint8_t>(b, b + t.nbytes)});
    TensorSpec& s = specs.back();
    if (s.name.size() < suffix.size() || s.name.compare(s.name.size() - suffix.size(), suffix.size(), suffix) != 0) continue;
    if (s.dtype != "BF16" || s.shape.size() != 2) fail("poisoned_copy: ", s.name, " is not a bf16 matrix");
    const std::size_t at = static_cast<std::size_t>(row * s.shape[1] + col) * 2;
    s.bytes.at(at) = 0xC1, s.bytes.at(at + 1) = 0x7F;  // a bf16 quiet NaN
    found = true;
  }
  if (!found) fail("poisoned_copy: no tensor ending in ", suffix);
  write_file(dir / "model.safetensors", safetensors_image(specs));
  return dir;
}

// The message of the error `run` raises ("" when it raises none).
template <typename F>
std::string error_of(F&& run) {
  try {
    run();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// The same step through the logits path (forward) and the greedy path (enqueue_argmax).
inline std::string logits_step_error(const Qwen35Model& model, const Step& step, int slots, ThreadPool& pool) {
  ModelCache cache = model.new_cache(slots);
  for (int i = 0; i < slots; ++i) cache.acquire();
  std::vector<float> logits;
  return error_of([&] { model.forward(step, cache, pool, logits); });
}
inline std::string greedy_step_error(const Qwen35Model& model, const Step& step, int slots, ThreadPool& pool) {
  ModelCache cache = model.new_cache(slots);
  for (int i = 0; i < slots; ++i) cache.acquire();
  StepQueue queue(model, cache, pool);
  std::vector<int32_t> picks;
  return error_of([&] { queue.run(step, picks); });
}

#define QWENRT_EXPECT_HAS(msg, ...)                                                                                                   \
  do {                                                                                                                                \
    const std::string m_ = (msg);                                                                                                     \
    for (const char* part : {__VA_ARGS__}) EXPECT_NE(m_.find(part), std::string::npos) << "message: " << m_ << "\nmissing: " << part; \
  } while (0)

// Every case on `device` ("cpu", "cuda"): windows and decode steps of one to three rows, through
// the logits path and the greedy path.
inline void expect_non_finite_errors(const std::string& device) {
  ThreadPool pool(1);
  auto load = [&](const std::filesystem::path& dir) {
    Qwen35Model m = Qwen35Model::load(dir);
    m.use_device(parse_device(device));
    return m;
  };
  const Step window{Phase::Window, {{0, {1, 2, 3}}}, false};
  const Step decode1{Phase::Decode, {{0, {1}}}, false};
  const Step decode3{Phase::Decode, {{0, {1}}, {1, {2}}, {2, {3}}}, false};
  {
    // A NaN in layer 2's down projection: every row's stream after layer 2.
    const auto dir = poisoned_copy(device + "_layer", "layers.2.mlp.down_proj.weight", 0, 0);
    const Qwen35Model m = load(dir);
    for (const std::string& e : {logits_step_error(m, window, 1, pool), greedy_step_error(m, window, 1, pool)})
      QWENRT_EXPECT_HAS(e, "non-finite values in layer 2 (Gated DeltaNet)", "sequence slot 0, position 0", "qwenrt info --check");
    QWENRT_EXPECT_HAS(greedy_step_error(m, decode1, 1, pool), "non-finite values in layer 2", "sequence slot 0, position 0");
    QWENRT_EXPECT_HAS(greedy_step_error(m, decode3, 3, pool), "non-finite values in layer 2", "sequence slot 0, position 0");
    QWENRT_EXPECT_HAS(logits_step_error(m, decode3, 3, pool), "non-finite values in layer 2", "sequence slot 0, position 0");
    std::filesystem::remove_all(dir);
  }
  {
    // A NaN in token 7's embedding: the row that reads it, at its position.
    const auto dir = poisoned_copy(device + "_embedding", "embed_tokens.weight", 7, 5);
    const Qwen35Model m = load(dir);
    const Step with7{Phase::Window, {{0, {1, 2, 7, 3}}}, false};
    for (const std::string& e : {logits_step_error(m, with7, 1, pool), greedy_step_error(m, with7, 1, pool)})
      QWENRT_EXPECT_HAS(e, "non-finite values in embedding", "sequence slot 0, position 2");
    const Step decode7{Phase::Decode, {{0, {1}}, {1, {7}}}, false};
    QWENRT_EXPECT_HAS(greedy_step_error(m, decode7, 2, pool), "non-finite values in embedding", "sequence slot 1, position 0");
    std::filesystem::remove_all(dir);
  }
  {
    // A NaN in token 300's row of the tied head, a token no step reads: only the logits show it.
    const auto dir = poisoned_copy(device + "_head", "embed_tokens.weight", 300, 5);
    const Qwen35Model m = load(dir);
    for (const std::string& e : {logits_step_error(m, window, 1, pool), greedy_step_error(m, window, 1, pool)})
      QWENRT_EXPECT_HAS(e, "non-finite values in head", "sequence slot 0, position 2");
    for (const std::string& e :
         {logits_step_error(m, decode1, 1, pool), greedy_step_error(m, decode1, 1, pool), greedy_step_error(m, decode3, 3, pool)})
      QWENRT_EXPECT_HAS(e, "non-finite values in head", "sequence slot 0, position 0");
    std::filesystem::remove_all(dir);
  }
}

}  // namespace qwenrt::test
