// Bad input through the real binary ends in a clear error naming the file or option and the limit:
// never a hang, a crash, an "internal error" or silent garbage.
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sys/stat.h>
#include <thread>

#include "core/mapped_file.h"
#include "formats/npy.h"
#include "formats/safetensors.h"
#include "support/fixtures.h"
#include "support/run_command.h"

namespace qwenrt {
namespace {

namespace fs = std::filesystem;
using test::cli;
using test::run_command;

fs::path fixture(const std::string& name) { return test::fixtures_dir() / name; }
fs::path demo_model() { return fs::path(QWENRT_SOURCE_DIR) / "models" / "qwen35-demo-16m"; }

// A fresh temporary directory, removed at the end of the test.
struct TempDir {
  fs::path path;
  explicit TempDir(const std::string& tag) {
    path = fs::temp_directory_path() / ("qwenrt_" + tag + "_" + std::to_string(::getpid()));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
};

// A copy of `from` (symlinks to its files) into `to`, except `except`.
void link_copy(const fs::path& from, const fs::path& to, const std::string& except = "") {
  for (const auto& e : fs::directory_iterator(from))
    if (e.path().filename() != except) fs::create_symlink(e.path(), to / e.path().filename());
}

void write(const fs::path& p, const std::string& s) { std::ofstream(p, std::ios::binary) << s; }

void expect_clean_error(const test::CommandResult& r, const std::string& what, const std::vector<std::string>& parts) {
  EXPECT_NE(r.status, 0) << what;
  EXPECT_LT(r.status, 124) << what << " crashed or timed out: " << r.err;
  EXPECT_EQ(r.err.find("internal error"), std::string::npos) << what << ": " << r.err;
  for (const auto& p : parts) EXPECT_NE(r.err.find(p), std::string::npos) << what << "\nstderr: " << r.err;
}

TEST(CliInput, FifoAsCheckpointFileDoesNotHang) {
  TempDir dir("fifo_ckpt");
  link_copy(fixture("dense_tied"), dir.path, "config.json");
  ASSERT_EQ(::mkfifo((dir.path / "config.json").c_str(), 0600), 0);
  auto r = run_command("timeout 20 " + cli() + " info --model " + dir.path.string());
  expect_clean_error(r, "FIFO config.json", {(dir.path / "config.json").string(), "not a regular file"});

  TempDir shard("fifo_shard");
  link_copy(fixture("dense_tied"), shard.path, "model.safetensors");
  ASSERT_EQ(::mkfifo((shard.path / "model.safetensors").c_str(), 0600), 0);
  r = run_command("timeout 20 " + cli() + " info --model " + shard.path.string());
  expect_clean_error(r, "FIFO model.safetensors", {(shard.path / "model.safetensors").string(), "not a regular file"});
}

TEST(CliInput, FifoAndDirectoryAsInputFiles) {
  TempDir dir("fifo_input");
  const fs::path fifo = dir.path / "prompt.fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::string model = " --model " + fixture("dense_tied").string();
  for (const auto& [args, parts] : std::vector<std::pair<std::string, std::vector<std::string>>>{
           {" run -f " + fifo.string(), {"-f", fifo.string(), "not a regular file"}},
           {" run -f " + dir.path.string(), {"-f", dir.path.string(), "is a directory"}},
           {" template --model " + demo_model().string() + " --request " + dir.path.string(), {"--request", dir.path.string(), "is a directory"}},
           {" template --model " + demo_model().string() + " --request " + fifo.string(), {"--request", "not a regular file"}},
           {" generate" + model + " --max-tokens 1 --batch-file " + dir.path.string(), {"--batch-file", "is a directory"}},
       }) {
    expect_clean_error(run_command("timeout 20 " + cli() + args), args, parts);
  }
}

TEST(CliInput, ThreadsAreCapped) {
  const int64_t hw = std::max(1u, std::thread::hardware_concurrency());
  const std::string model = " --model " + fixture("dense_tied").string();
  auto r = run_command(cli() + " info" + model + " --threads " + std::to_string(4 * hw + 1));
  expect_clean_error(
      r, "threads 4x+1",
      {"--threads " + std::to_string(4 * hw + 1), "4x the " + std::to_string(hw) + " hardware threads", "at most " + std::to_string(4 * hw)});
  r = run_command(cli() + " info" + model + " --threads 1025");
  expect_clean_error(r, "threads 1025", {"--threads must be in [1, 1024]"});
  r = run_command(cli() + " info" + model + " --threads " + std::to_string(std::min<int64_t>(4 * hw, 1024)));
  EXPECT_EQ(r.status, 0) << r.err;
}

// --int8-activations reaches the CPU's products (the logits of a 4-bit checkpoint change, within
// the mode's error) and is refused with a GPU device or a value.
TEST(CliInput, Int8ActivationsIsACpuOption) {
  TempDir dir("int8_flag");
  const std::string base = cli() + " logits --model " + fixture("mlx_q4_g64").string() + " --tokens 1,2,3,4";
  auto exact = run_command(base + " --out " + (dir.path / "exact.npy").string());
  ASSERT_EQ(exact.status, 0) << exact.err;
  auto int8 = run_command(base + " --int8-activations --out " + (dir.path / "int8.npy").string());
  ASSERT_EQ(int8.status, 0) << int8.err;
  const auto a = read_npy(dir.path / "exact.npy"), b = read_npy(dir.path / "int8.npy");
  ASSERT_EQ(a.values.size(), b.values.size());
  const double diff = test::relative_l2(b.values, a.values);
  EXPECT_GT(diff, 1e-6) << "the flag did not reach the products";
  EXPECT_LT(diff, 0.05);
  expect_clean_error(run_command(base + " --int8-activations --device cuda --out " + (dir.path / "x.npy").string()), "int8 on cuda",
                     {"--int8-activations is a CPU mode"});
  expect_clean_error(run_command(base + " --int8-activations=1 --out " + (dir.path / "x.npy").string()), "int8 with a value",
                     {"--int8-activations takes no value"});
}

TEST(CliInput, RunAndChatRejectInvalidUtf8) {
  TempDir dir("utf8");
  write(dir.path / "bad.txt", "hello \xff\xfe world");
  const std::string model = " --model " + demo_model().string() + " -n 2";
  expect_clean_error(run_command(cli() + " run" + model + " -p \"$(printf 'ab\\303')\""), "-p", {"the prompt (-p) is not valid UTF-8", "byte 2"});
  expect_clean_error(run_command(cli() + " run" + model + " -f " + (dir.path / "bad.txt").string()), "-f",
                     {"the prompt file " + (dir.path / "bad.txt").string() + " is not valid UTF-8", "byte 6"});
  expect_clean_error(run_command(cli() + " run" + model + " -p hi --system \"$(printf '\\355\\240\\200')\""), "--system",
                     {"the system prompt (--system) is not valid UTF-8"});
  expect_clean_error(run_command("printf 'hi\\n/quit\\n' | " + cli() + " chat" + model + " --system \"$(printf '\\300\\200')\""), "chat --system",
                     {"chat: the system prompt (--system) is not valid UTF-8"});
  // A bad chat line is reported and skipped; the session goes on.
  auto r = run_command("printf '\\377\\n/set system \\376\\n/quit\\n' | " + cli() + " chat" + model + " --no-think");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("the input line is not valid UTF-8 (ill-formed sequence at byte 0)"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("/set system: the system prompt is not valid UTF-8"), std::string::npos) << r.err;
}

TEST(CliInput, GenerationConfigIsValidated) {
  for (const auto& [content, parts] : std::vector<std::pair<std::string, std::vector<std::string>>>{
           {R"({"top_k": 4294967296})", {"\"top_k\" = 4294967296 is outside [0, 16777216]"}},
           {R"({"eos_token_id": 4294983647})", {"\"eos_token_id\" = 4294983647 is outside [0, 16777215]"}},
           {R"({"eos_token_id": 20000})", {"eos_token_id 20000 is not a token id (the vocabulary has 8192 tokens"}},
           {R"({"temperature": "hot"})", {"\"temperature\" must be a number in [0, 100], got \"hot\""}},
           {R"({"top_p": "0.9"})", {"\"top_p\" must be a number in (0, 1]"}},
           {R"({"do_sample": 1})", {"\"do_sample\" must be true or false"}},
           {R"([])", {"must hold a JSON object"}},
       }) {
    TempDir dir("genconfig");
    link_copy(demo_model(), dir.path, "generation_config.json");
    write(dir.path / "generation_config.json", content);
    auto r = run_command(cli() + " run --model " + dir.path.string() + " -p hi -n 1");
    std::vector<std::string> all = parts;
    all.push_back((dir.path / "generation_config.json").string());
    expect_clean_error(r, content, all);
  }
}

// Writes one value of `bits` (the dtype's own encoding) at flat index `index` of `tensor`.
void poke(const fs::path& file, const std::string& tensor, int64_t index, uint32_t f32_bits, uint16_t f16_bits, uint16_t bf16_bits) {
  std::string image;
  {
    MappedFile map(file);
    image.assign(reinterpret_cast<const char*>(map.bytes().data()), map.bytes().size());
  }
  const auto span = std::span(reinterpret_cast<const std::byte*>(image.data()), image.size());
  for (const auto& t : parse_safetensors(span, file.string())) {
    if (t.name != tensor) continue;
    const std::size_t at = static_cast<std::size_t>(t.data - span.data()) + static_cast<std::size_t>(index) * dtype_size(t.dtype);
    if (t.dtype == DType::F32) std::memcpy(image.data() + at, &f32_bits, 4);
    else if (t.dtype == DType::F16) std::memcpy(image.data() + at, &f16_bits, 2);
    else std::memcpy(image.data() + at, &bf16_bits, 2);
  }
  fs::remove(file);
  write(file, image);
}

TEST(CliInput, InfoCheckFindsNanAndInf) {
  // Clean checkpoints pass.
  for (const std::string name : {"dense_tied", "mixed_dtypes", "sharded"}) {
    auto r = run_command(cli() + " info --check --model " + fixture(name).string());
    EXPECT_EQ(r.status, 0) << name << ": " << r.out << r.err;
    EXPECT_NE(r.out.find("ok:"), std::string::npos) << r.out;
  }
  // mixed_dtypes holds BF16, F16 and F32 tensors: a NaN in one F16 and an Inf in one F32 tensor.
  TempDir dir("check");
  link_copy(fixture("mixed_dtypes"), dir.path, "model.safetensors");
  fs::copy_file(fixture("mixed_dtypes") / "model.safetensors", dir.path / "model.safetensors");
  std::string f16_name, f32_name, bf16_name;
  {
    MappedFile map(dir.path / "model.safetensors");
    for (const auto& t : parse_safetensors(map.bytes(), "x")) {
      if (t.dtype == DType::F16 && f16_name.empty() && t.numel() > 5) f16_name = t.name;
      if (t.dtype == DType::F32 && f32_name.empty() && t.numel() > 3) f32_name = t.name;
      if (t.dtype == DType::BF16 && bf16_name.empty() && t.numel() > 9) bf16_name = t.name;
    }
  }
  ASSERT_FALSE(f16_name.empty() || f32_name.empty() || bf16_name.empty());
  const fs::path st = dir.path / "model.safetensors";
  poke(st, f16_name, 5, 0, 0x7E00, 0);       // NaN
  poke(st, f32_name, 3, 0x7F800000u, 0, 0);  // +Inf
  poke(st, bf16_name, 9, 0, 0, 0xFF80);      // -Inf
  poke(st, bf16_name, 11, 0, 0, 0x7FC1);     // NaN
  auto r = run_command(cli() + " info --check --model " + dir.path.string());
  EXPECT_EQ(r.status, 1) << r.out << r.err;
  EXPECT_NE(r.out.find(f16_name + " (" + st.string() + "): 1 NaN, 0 Inf, first at flat index 5"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(f32_name + " (" + st.string() + "): 0 NaN, 1 Inf, first at flat index 3"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(bf16_name + " (" + st.string() + "): 1 NaN, 1 Inf, first at flat index 9"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("FAILED: 67 tensors"), std::string::npos) << r.out;

  r = run_command(cli() + " info --check --json --model " + dir.path.string());
  EXPECT_EQ(r.status, 1) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["ok"], false);
  ASSERT_EQ(j["non_finite"].size(), 3u);
  for (const auto& t : j["non_finite"]) {
    EXPECT_EQ(t["file"], st.string());
    const std::vector<int64_t> got = {t["nan"].get<int64_t>(), t["inf"].get<int64_t>(), t["first_index"].get<int64_t>()};
    if (t["tensor"] == f16_name) EXPECT_EQ(got, (std::vector<int64_t>{1, 0, 5}));
    else if (t["tensor"] == f32_name) EXPECT_EQ(got, (std::vector<int64_t>{0, 1, 3}));
    else {
      EXPECT_EQ(t["tensor"], bf16_name);
      EXPECT_EQ(got, (std::vector<int64_t>{1, 1, 9}));
    }
  }
}

}  // namespace
}  // namespace qwenrt
