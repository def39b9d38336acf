#include "cli/synthetic_model.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "model/released_shapes.h"

namespace qwenrt::cli {

namespace {

std::size_t available_memory_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  std::size_t kb;
  std::string unit;
  while (in >> key >> kb >> unit)
    if (key == "MemAvailable:") return kb * 1024;
  return 0;
}

}  // namespace

std::size_t matmul_params(const ModelConfig& c) {
  const int64_t H = c.hidden_size;
  std::size_t params = 0;
  for (auto kind : c.layer_types) {
    params += kind == LayerKind::FullAttention
                  ? static_cast<std::size_t>((2 * c.num_heads + 2 * c.num_kv_heads) * c.head_dim * H + H * c.num_heads * c.head_dim)
                  : static_cast<std::size_t>((c.conv_dim() + 2 * c.value_dim() + 2 * c.linear_num_value_heads) * H);
    params += c.moe ? static_cast<std::size_t>(3 * H * (c.num_experts * c.moe_intermediate_size + c.shared_expert_intermediate_size))
                    : static_cast<std::size_t>(3 * H * c.intermediate_size);
  }
  return params;
}

Qwen35Model synthetic_model(const std::string& name, const DeviceSpec& device, const std::string& command, SyntheticFormat format) {
  ModelConfig c = released_shape(name);
  // Size check before allocating: random weights are all resident. Bytes per weight of the packed
  // forms: 4 bits + a bf16 scale and bias per 64 (q4), 8 bits + the same per 32 (q8), 1 byte (fp8).
  const double bytes_per_weight = format == SyntheticFormat::MlxQ4   ? 0.5625
                                  : format == SyntheticFormat::MlxQ8 ? 1.0625
                                  : format == SyntheticFormat::Fp8   ? 1.0
                                                                     : 2.0;
  const std::size_t need =
      static_cast<std::size_t>(bytes_per_weight * static_cast<double>(matmul_params(c) + static_cast<std::size_t>(c.vocab_size * c.hidden_size) *
                                                                                             (c.tie_word_embeddings ? 1 : 2)));
  const bool on_gpu = device.kind == DeviceSpec::Kind::Cuda;  // random matrices are made on the GPU
  const std::size_t avail = available_memory_bytes();
  if (!on_gpu && avail != 0 && need > avail * 9 / 10)
    fail(command, ": random weights of ", name, " need ", need / 1e9, " GB of memory but only ", avail / 1e9,
         " GB are available; try a smaller size (0.8b, 2b, 4b)");
  return Qwen35Model(c, synthetic_weights(c, 1234, /*host_matrices=*/!on_gpu, format));
}

text::Tokenizer placeholder_tokenizer(int64_t vocab_size) {
  // The tokenizer loads from a file: write a byte-level BPE vocabulary of "<i>" entries (ASCII,
  // which byte-level encoding leaves as it is) to a private temporary folder and load it.
  // The vocabulary is written as text: an ordered_json object would search its keys on every insert.
  std::string vocab = "{";
  for (int64_t i = 0; i < vocab_size; ++i) vocab += (i ? ",\"<" : "\"<") + std::to_string(i) + ">\":" + std::to_string(i);
  // Byte-level BPE needs a token for each byte (GPT-2's byte-to-character map): they get ids past
  // the model's vocabulary, which it never samples.
  for (int b = 0, shifted = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    char entry[32];
    std::snprintf(entry, sizeof(entry), ",\"\\u%04x\":", printable ? b : 256 + shifted++);
    vocab += entry + std::to_string(vocab_size + b);
  }
  vocab += "}";
  const std::string byte_level = R"({"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": true})";
  const std::string file = R"({"version": "1.0", "added_tokens": [], "normalizer": null, "pre_tokenizer": )" + byte_level + R"(, "decoder": )" +
                           byte_level + R"(, "model": {"type": "BPE", "merges": [], "vocab": )" + vocab + "}}";
  namespace fs = std::filesystem;
  std::string dir_template = (fs::temp_directory_path() / "qwenrt-synthetic-XXXXXX").string();
  if (!mkdtemp(dir_template.data())) fail("serve: cannot make a temporary folder for the placeholder tokenizer");
  const fs::path dir = dir_template;
  try {
    std::ofstream(dir / "tokenizer.json") << file;
    text::Tokenizer tokenizer = text::Tokenizer::load(dir);
    fs::remove_all(dir);
    return tokenizer;
  } catch (...) {
    std::error_code ignored;
    fs::remove_all(dir, ignored);
    throw;
  }
}

}  // namespace qwenrt::cli
