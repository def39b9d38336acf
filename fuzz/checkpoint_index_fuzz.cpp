// libFuzzer target: the shard index (model.safetensors.index.json) and the weight binding of a
// checkpoint directory. The input is the index JSON, optionally followed by a NUL byte and a
// config.json to bind against; the shards are the committed `sharded` fixture, copied once into a
// temporary directory. Either every tensor the index names is bound consistently, or
// qwenrt::Error; any other exception or a crash is a finding.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "core/error.h"
#include "formats/checkpoint_dir.h"
#include "model/config.h"
#include "model/weights.h"

namespace fs = std::filesystem;

namespace {

fs::path fixture() {
  const char* env = std::getenv("QWENRT_SOURCE_DIR");
  return fs::path(env && *env ? env : QWENRT_SOURCE_DIR) / "tests" / "fixtures" / "sharded";
}

const fs::path& work_dir() {
  static const fs::path dir = [] {
    const fs::path d = fs::temp_directory_path() / ("qwenrt_index_fuzz_" + std::to_string(::getpid()));
    fs::remove_all(d);
    fs::create_directories(d);
    for (const auto& e : fs::directory_iterator(fixture()))
      if (e.path().extension() == ".safetensors" || e.path().filename() == "config.json") fs::copy_file(e.path(), d / e.path().filename());
    if (!fs::exists(d / "config.json")) std::abort();  // the fixture is missing: nothing to fuzz against
    std::atexit([] { fs::remove_all(work_dir()); });
    return d;
  }();
  return dir;
}

// The fixture's config.json, kept in memory: restored with a plain write each run (copy_file's
// sendfile can fail with EINTR under libFuzzer's signals, which was a harness crash, not a finding).
const std::string& original_config() {
  static const std::string text = [] {
    std::ifstream in(work_dir() / "config.json", std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }();
  return text;
}

void write(const fs::path& p, const char* data, std::size_t size) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(data, static_cast<std::streamsize>(size));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const fs::path& dir = work_dir();
  const std::string& config = original_config();
  const char* bytes = reinterpret_cast<const char*>(data);
  const void* nul = std::memchr(bytes, 0, size);
  const std::size_t index_size = nul ? static_cast<std::size_t>(static_cast<const char*>(nul) - bytes) : size;
  write(dir / "model.safetensors.index.json", bytes, index_size);
  if (nul) write(dir / "config.json", bytes + index_size + 1, size - index_size - 1);
  else write(dir / "config.json", config.data(), config.size());
  try {
    const qwenrt::CheckpointDir ckpt(dir);
    for (const auto& [name, t] : ckpt.tensors()) {
      if (t->name != name || ckpt.find(name) != t) std::abort();
      if (fs::path(t->file).parent_path() != dir) std::abort();  // shards only from inside the directory
    }
    const qwenrt::ModelConfig c = qwenrt::parse_model_config(ckpt.config(), (dir / "config.json").string());
    const qwenrt::ModelWeights w = qwenrt::bind_weights(c, ckpt);
    if (static_cast<int64_t>(w.layers.size()) != c.num_layers) std::abort();
    if (w.embed.rows != c.vocab_size || w.final_norm.size() != static_cast<std::size_t>(c.hidden_size)) std::abort();
  } catch (const qwenrt::Error&) {}
  return 0;
}
