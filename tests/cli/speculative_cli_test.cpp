// --speculative mtp and --deterministic through the command line: same tokens as without, the
// statistics in the JSON, and clear errors for what is not possible.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "support/fixtures.h"
#include "support/run_command.h"

namespace qwenrt {
namespace {

using test::cli;
using test::run_command;

std::string fixture(const std::string& name) { return (test::fixtures_dir() / name).string(); }
std::string demo() { return std::string(QWENRT_SOURCE_DIR) + "/models/qwen35-demo-16m"; }

TEST(SpeculativeCli, GenerateGivesTheSameTokensAndReportsSteps) {
  const std::string base = cli() + " generate --model " + demo() + " --tokens 100,200,300,400,500,600 --max-tokens 24 --json --threads 2";
  auto plain = run_command(base);
  ASSERT_EQ(plain.status, 0) << plain.err;
  for (const char* k : {"1", "4"}) {
    auto spec = run_command(base + " --speculative mtp --deterministic --draft-tokens " + k);
    ASSERT_EQ(spec.status, 0) << spec.err;
    const auto a = nlohmann::json::parse(plain.out), b = nlohmann::json::parse(spec.out);
    EXPECT_EQ(b["tokens"], a["tokens"]) << "k " << k;
    const int64_t steps = b["steps"], accepted = b["accepted"], drafted = b["drafted"];
    EXPECT_EQ(steps + accepted, 23);  // every token after the first came from a step, or was an accepted draft
    EXPECT_LE(accepted, drafted);
  }
}

TEST(SpeculativeCli, RunSampledIsTheSame) {
  const std::string base =
      cli() + " run --model " + demo() + " -p 'Tell me a fortune.' --max-tokens 24 --seed 7 --temperature 0.8 --json --threads 2";
  auto plain = run_command(base);
  auto spec = run_command(base + " --speculative mtp");
  ASSERT_EQ(plain.status, 0) << plain.err;
  ASSERT_EQ(spec.status, 0) << spec.err;
  const auto a = nlohmann::json::parse(plain.out), b = nlohmann::json::parse(spec.out);
  EXPECT_EQ(b["tokens"], a["tokens"]);
  EXPECT_EQ(b["text"], a["text"]);
  EXPECT_TRUE(b.contains("speculation"));
}

TEST(SpeculativeCli, BenchReportsBothRates) {
  const auto text = std::filesystem::path(QWENRT_SOURCE_DIR) / "README.md";
  auto r = run_command(cli() + " bench --model " + demo() + " -f " + text.string() +
                       " --speculative mtp --segments 1 --prompt-tokens 32 --gen-tokens 8 --json --threads 2");
  ASSERT_EQ(r.status, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_TRUE(j["identical_tokens"].get<bool>());
  EXPECT_GT(j["decode_tok_s_plain"].get<double>(), 0);
  EXPECT_GT(j["decode_tok_s_speculative"].get<double>(), 0);
  EXPECT_GE(j["mean_tokens_per_step"].get<double>(), 1.0);
  EXPECT_EQ(j["acceptance_per_position"].size(), 3u);
}

TEST(SpeculativeCli, ClearErrors) {
  auto no_mtp = run_command(cli() + " generate --model " + fixture("dense_tied") + " --tokens 1,2,3 --max-tokens 4 --speculative mtp");
  EXPECT_NE(no_mtp.status, 0);
  EXPECT_NE(no_mtp.err.find("no mtp.* tensors"), std::string::npos) << no_mtp.err;
  auto bad_kind = run_command(cli() + " generate --model " + demo() + " --tokens 1,2,3 --max-tokens 4 --speculative eagle");
  EXPECT_NE(bad_kind.status, 0);
  EXPECT_NE(bad_kind.err.find("--speculative takes 'mtp'"), std::string::npos) << bad_kind.err;
  auto lone_k = run_command(cli() + " generate --model " + demo() + " --tokens 1,2,3 --max-tokens 4 --draft-tokens 2");
  EXPECT_NE(lone_k.status, 0);
  EXPECT_NE(lone_k.err.find("--draft-tokens needs --speculative mtp"), std::string::npos) << lone_k.err;
  auto bad_k = run_command(cli() + " generate --model " + demo() + " --tokens 1,2,3 --max-tokens 4 --speculative mtp --draft-tokens 0");
  EXPECT_NE(bad_k.status, 0);
  auto bench_file = run_command(cli() + " bench --model " + demo() + " -f /dev/null");
  EXPECT_NE(bench_file.status, 0);
  EXPECT_NE(bench_file.err.find("goes with --speculative mtp"), std::string::npos) << bench_file.err;
}

}  // namespace
}  // namespace qwenrt
