// The demo model that ships in models/: its greedy completion of a fixed prompt matches the one
// transformers computed in float64 when the model was exported (greedy_reference.json), and
// `qwenrt run` works on it end to end.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "formats/json_file.h"
#include "support/run_command.h"

namespace qwenrt {
namespace {

namespace fs = std::filesystem;

std::vector<fs::path> demo_models() {
  std::vector<fs::path> dirs;
  const fs::path root = fs::path(QWENRT_SOURCE_DIR) / "models";
  if (fs::exists(root))
    for (const auto& e : fs::directory_iterator(root))
      if (fs::exists(e.path() / "greedy_reference.json")) dirs.push_back(e.path());
  return dirs;
}

TEST(DemoModel, ShipsWithTheRepository) { EXPECT_FALSE(demo_models().empty()) << "no models/*/greedy_reference.json"; }

TEST(DemoModel, GreedyCompletionIsStable) {
  for (const auto& dir : demo_models()) {
    const auto ref = read_json_file(dir / "greedy_reference.json");
    const auto prompt = ref.at("prompt_ids").get<std::vector<int32_t>>();
    const auto expected = ref.at("greedy_ids").get<std::vector<int32_t>>();
    std::string ids;
    for (std::size_t i = 0; i < prompt.size(); ++i) ids += (i ? "," : "") + std::to_string(prompt[i]);
    auto r = test::run_command(test::cli() + " generate --model " + dir.string() + " --tokens " + ids + " --max-tokens " +
                               std::to_string(expected.size()) + " --temperature 0 --json");
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(nlohmann::json::parse(r.out)["tokens"].get<std::vector<int32_t>>(), expected) << dir;
  }
}

TEST(DemoModel, RunStreamsEnglish) {
  for (const auto& dir : demo_models()) {
    auto r =
        test::run_command(test::cli() + " run --model " + dir.string() + " -p 'Tell me about the sea.' --no-think --max-tokens 24 --seed 7 --json");
    ASSERT_EQ(r.status, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_GT(j["tokens"].size(), 0u);
    EXPECT_EQ(j["timings"]["generated_tokens"], j["tokens"].size());
    // Seeded sampling reproduces exactly.
    auto again =
        test::run_command(test::cli() + " run --model " + dir.string() + " -p 'Tell me about the sea.' --no-think --max-tokens 24 --seed 7 --json");
    EXPECT_EQ(nlohmann::json::parse(again.out)["tokens"], j["tokens"]);
  }
}

TEST(DemoModel, ChatKeepsHistoryAndHandlesCommands) {
  for (const auto& dir : demo_models()) {
    auto r = test::run_command("printf 'Hello there.\\n/set temperature 0\\n/set bogus 3\\nAnd now?\\n/reset\\n/quit\\n' | " + test::cli() +
                               " chat --model " + dir.string() + " --no-think --max-tokens 12 --seed 1");
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.err.find("tok/s"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("unknown option '--bogus'"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("conversation cleared"), std::string::npos) << r.err;
    EXPECT_FALSE(r.out.empty());
  }
}

}  // namespace
}  // namespace qwenrt
