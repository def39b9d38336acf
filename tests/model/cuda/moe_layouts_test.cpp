// The expert layouts the loader accepts end in one device layout: the released-shape MoE fixture
// (fused experts.gate_up_proj / experts.down_proj) rewritten with one tensor per expert
// (experts.{e}.gate_proj / up_proj / down_proj) gives the same logits on the GPU bit for bit, through
// a window of prompt rows (the grouped path) and decode rows.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <regex>

#include "backend/cuda/gpu_test_support.h"
#include "formats/safetensors.h"
#include "formats/safetensors_writer.h"
#include "model/cuda/cuda_forward.h"
#include "model/qwen35_model.h"
#include "support/fixtures.h"

namespace qwenrt {
namespace {

namespace fs = std::filesystem;

// The fixture's checkpoint with every fused expert tensor split into per-expert ones.
fs::path write_per_expert_copy(const fs::path& src) {
  const fs::path dst = fs::temp_directory_path() / ("qwenrt_moe_per_expert_" + std::to_string(::getpid()));
  fs::create_directories(dst);
  fs::copy_file(src / "config.json", dst / "config.json", fs::copy_options::overwrite_existing);
  const SafetensorsFile in(src / "model.safetensors");
  SafetensorsWriter out(dst / "model.safetensors", nlohmann::json::object());
  struct Part {
    std::string name;
    const std::byte* data;
    std::size_t bytes;
  };
  std::vector<Part> parts;
  const std::regex fused(R"((.*mlp\.experts\.)(gate_up_proj|down_proj))");
  for (const TensorInfo& t : in.tensors()) {
    std::smatch m;
    if (!std::regex_match(t.name, m, fused)) {
      out.declare(t.name, t.dtype, t.shape);
      parts.push_back({t.name, t.data, t.nbytes});
      continue;
    }
    const int64_t E = t.shape[0], rows = t.shape[1], cols = t.shape[2];
    const std::size_t per = t.nbytes / static_cast<std::size_t>(E);
    for (int64_t e = 0; e < E; ++e) {
      const std::string p = m[1].str() + std::to_string(e) + ".";
      const std::byte* d = t.data + static_cast<std::size_t>(e) * per;
      if (m[2] == "down_proj") {
        out.declare(p + "down_proj.weight", t.dtype, {rows, cols});
        parts.push_back({p + "down_proj.weight", d, per});
      } else {  // gate rows then up rows
        out.declare(p + "gate_proj.weight", t.dtype, {rows / 2, cols});
        out.declare(p + "up_proj.weight", t.dtype, {rows / 2, cols});
        parts.push_back({p + "gate_proj.weight", d, per / 2});
        parts.push_back({p + "up_proj.weight", d + per / 2, per / 2});
      }
    }
  }
  for (const Part& p : parts) out.write(p.name, {p.data, p.bytes});
  out.finish();
  return dst;
}

TEST(CudaMoeLayouts, FusedAndPerExpertCheckpointsGiveTheSameBits) {
  QWENRT_REQUIRE_GPU();
  const fs::path fused_dir = test::fixtures_dir() / "moe_released";
  const fs::path split_dir = write_per_expert_copy(fused_dir);
  ThreadPool pool(1);
  auto run = [&](const fs::path& dir) {
    Qwen35Model model = Qwen35Model::load(dir);
    model.use_device(parse_device("cuda"));
    ModelCache cache = model.new_cache(1);
    const int slot = cache.acquire();
    std::vector<int32_t> prompt;
    for (int i = 0; i < 37; ++i) prompt.push_back((i * 37 + 11) % static_cast<int>(model.config().vocab_size));
    std::vector<float> all = model.forward({Phase::Window, {{slot, prompt}}, true}, cache, pool);
    for (int32_t t : {5, 17, 3}) {
      const auto l = model.forward({Phase::Decode, {{slot, {t}}}, false}, cache, pool);
      all.insert(all.end(), l.begin(), l.end());
    }
    return all;
  };
  const auto fused = run(fused_dir), split = run(split_dir);
  fs::remove_all(split_dir);
  ASSERT_EQ(fused.size(), split.size());
  EXPECT_EQ(0, std::memcmp(fused.data(), split.data(), fused.size() * sizeof(float)));
}

}  // namespace
}  // namespace qwenrt
