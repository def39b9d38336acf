// The qwenrt command line end to end: outputs in the documented formats, errors on stderr with a
// non-zero exit (never a crash).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "engine/greedy_generation.h"
#include "formats/npy.h"
#include "model/qwen35_model.h"
#include "support/fixtures.h"
#include "support/run_command.h"

namespace qwenrt {
namespace {

using test::cli;
using test::run_command;

std::string fixture(const std::string& name) { return (test::fixtures_dir() / name).string(); }
std::string demo_model() { return (test::fixtures_dir().parent_path().parent_path() / "models" / "qwen35-demo-16m").string(); }

std::string ids(const std::vector<int32_t>& v) {
  std::string s;
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s;
}

TEST(Cli, LogitsWritesNpyOfEveryPosition) {
  const auto ref = test::load_reference("dense_tied");
  const auto out = std::filesystem::temp_directory_path() / ("qwenrt_logits_" + std::to_string(::getpid()) + ".npy");
  auto r = run_command(cli() + " logits --model " + fixture("dense_tied") + " --tokens " + ids(ref.prompt) + " --out " + out.string() +
                       " --prefill-chunk 7 --threads 2");
  ASSERT_EQ(r.status, 0) << r.err;
  const auto got = read_npy(out);
  const auto expected = read_npy(test::fixtures_dir() / "dense_tied" / "logits.npy");
  EXPECT_EQ(got.shape, expected.shape);
  EXPECT_LT(test::relative_l2(got.values, expected.values), 1e-5);
  std::filesystem::remove(out);
}

TEST(Cli, GenerateJsonAndBatchFile) {
  const auto ref = test::load_reference("dense_tied");
  auto r = run_command(cli() + " generate --model " + fixture("dense_tied") + " --tokens " + ids(ref.prompt) + " --max-tokens " +
                       std::to_string(ref.greedy.size()) + " --temperature 0 --json");
  ASSERT_EQ(r.status, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["tokens"].get<std::vector<int32_t>>(), ref.greedy);

  // Stop ids end generation (the stop id itself is reported).
  r = run_command(cli() + " generate --model " + fixture("dense_tied") + " --tokens " + ids(ref.prompt) +
                  " --max-tokens 16 --temperature 0 --json --stop-ids " + std::to_string(ref.greedy[2]));
  ASSERT_EQ(r.status, 0) << r.err;
  auto stopped = nlohmann::json::parse(r.out)["tokens"].get<std::vector<int32_t>>();
  std::size_t first = 0;
  while (ref.greedy[first] != ref.greedy[2]) ++first;
  EXPECT_EQ(stopped, std::vector<int32_t>(ref.greedy.begin(), ref.greedy.begin() + static_cast<long>(first) + 1));

  // Batch file: each line decoded together, one JSON line each, same as alone.
  const auto batch = std::filesystem::temp_directory_path() / ("qwenrt_batch_" + std::to_string(::getpid()) + ".txt");
  {
    std::ofstream f(batch);
    f << ids(ref.prompt) << "\n" << ids({ref.prompt.begin(), ref.prompt.begin() + 9}) << "\n\n" << ids(ref.prompt) << "\n";
  }
  r = run_command(cli() + " generate --model " + fixture("dense_tied") + " --batch-file " + batch.string() + " --max-tokens " +
                  std::to_string(ref.greedy.size()) + " --temperature 0 --json");
  ASSERT_EQ(r.status, 0) << r.err;
  std::istringstream lines(r.out);
  std::string line;
  std::vector<std::vector<int32_t>> outs;
  while (std::getline(lines, line)) outs.push_back(nlohmann::json::parse(line)["tokens"].get<std::vector<int32_t>>());
  ASSERT_EQ(outs.size(), 3u);
  EXPECT_EQ(outs[0], ref.greedy);
  EXPECT_EQ(outs[2], ref.greedy);
  std::filesystem::remove(batch);
}

TEST(Cli, InfoDescribesTheCheckpoint) {
  auto r = run_command(cli() + " info --model " + fixture("moe") + " --json");
  ASSERT_EQ(r.status, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["architecture"], "Qwen3_5MoeForCausalLM");
  EXPECT_TRUE(j.contains("moe"));
  EXPECT_GT(j["parameters"].get<int64_t>(), 0);
  EXPECT_TRUE(j["dtypes"].contains("BF16"));
  r = run_command(cli() + " info --model " + fixture("vlm"));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("Qwen3_5ForConditionalGeneration"), std::string::npos);
  EXPECT_NE(r.out.find("layers"), std::string::npos);
}

TEST(Cli, InfoShowsQuantizedFormatsAndBitsPerWeight) {
  auto r = run_command(cli() + " info --model " + fixture("fp8_dense") + " --json");
  ASSERT_EQ(r.status, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  ASSERT_TRUE(j["weight_formats"].contains("fp8_e4m3 block 128x128 bf16 scales")) << r.out;
  EXPECT_EQ(j["weight_formats"]["fp8_e4m3 block 128x128 bf16 scales"]["matrices"], 25);
  EXPECT_TRUE(j["weight_formats"].contains("bf16"));  // embedding, head, in_proj_a/b
  const double fp8_bits = j["matrix_bits_per_weight"].get<double>();
  EXPECT_GT(fp8_bits, 8.0);
  EXPECT_LT(fp8_bits, 16.0);
  r = run_command(cli() + " info --model " + fixture("mlx_q4_g64"));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("mlx_affine 4-bit g64"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("bits per weight"), std::string::npos) << r.out;
}

TEST(Cli, PerplexityReportsItsNumbers) {
  const std::string text = "/tmp/qwenrt_ppl_" + std::to_string(::getpid()) + ".txt";
  {
    std::FILE* f = std::fopen(text.c_str(), "w");
    std::fputs("The quick brown fox jumps over the lazy dog. It was the best of times, it was the worst of times.\n", f);
    std::fclose(f);
  }
  auto r = run_command(cli() + " perplexity --model " + demo_model() + " -f " + text + " --ctx 8 --json --threads 2");
  ASSERT_EQ(r.status, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["ctx"], 8);
  EXPECT_GT(j["tokens"].get<int64_t>(), 8);
  EXPECT_EQ(j["windows"].get<int64_t>(), (j["tokens"].get<int64_t>() + 6) / 8);
  EXPECT_GT(j["perplexity"].get<double>(), 1.0);
  EXPECT_GT(j["tokens_per_second"].get<double>(), 0.0);
  r = run_command(cli() + " perplexity --model " + demo_model() + " -f " + text + " --ctx 1");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("--ctx"), std::string::npos) << r.err;
  std::remove(text.c_str());
}

TEST(Cli, BadInvocationsFailCleanly) {
  const std::string model = " --model " + fixture("dense_tied");
  struct Case {
    std::string args, expect;
  };
  for (const Case& c : std::vector<Case>{
           {"frobnicate", "unknown command"},
           {"bench" + model + " --quant q4", "--quant applies to --synthetic"},
           {"bench --synthetic 0.8b --quant q5", "'q5' is not one of"},
           {"quantize" + model + " --out /tmp/qwenrt_never --bits 7", "bits = 7"},
           {"logits" + model + " --tokens 1,2 --out /tmp/x.npy --bogus 3", "unknown option '--bogus'"},
           {"logits --tokens 1,2 --out /tmp/x.npy", "--model is required"},
           {"logits" + model + " --tokens 1,x,2 --out /tmp/x.npy", "'x' is not a token id"},
           {"logits" + model + " --tokens 1,99999999 --out /tmp/x.npy", "outside the vocabulary"},
           {"logits" + model + " --tokens 1,2 --out /nonexistent-dir/x.npy", "cannot open for writing"},
           {"logits --model /nonexistent --tokens 1 --out /tmp/x.npy", "not a checkpoint directory"},
           {"generate" + model + " --tokens 1,2 --max-tokens -3", "--max-tokens must be in"},
           {"generate" + model + " --tokens 1,2 --threads 0", "--threads must be in"},
           {"generate" + model + " --tokens 1,2 --temperature 0.7", "only greedy"},
           {"generate" + model + " --max-tokens 2", "exactly one of --tokens and --batch-file"},
           {"generate" + model + " --batch-file /nonexistent.txt", "--batch-file: /nonexistent.txt: cannot open"},
           {"bench --synthetic 1000b", "unknown synthetic model"},
           {"logits" + model + " --tokens 1,2 --out /tmp/x.npy --prefill-chunk 0", "--prefill-chunk must be in"},
       }) {
    auto r = run_command(cli() + " " + c.args);
    EXPECT_NE(r.status, 0) << c.args;
    EXPECT_LT(r.status, 128) << c.args << " crashed: " << r.err;
    EXPECT_NE(r.err.find(c.expect), std::string::npos) << c.args << "\nstderr: " << r.err;
  }
}

}  // namespace
}  // namespace qwenrt
