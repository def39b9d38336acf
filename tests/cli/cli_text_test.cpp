// `qwenrt tokenize` and `qwenrt template` end to end against the reference goldens.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "support/run_command.h"

namespace qwenrt {
namespace {

namespace fs = std::filesystem;
using test::cli;
using test::run_command;

const fs::path kData = fs::path(QWENRT_SOURCE_DIR) / "tests" / "data";
const fs::path kQwen3 = fs::path(QWENRT_TOKENIZER_DATA_DIR) / "qwen3";  // tokenizer.json unpacked (cmake/test_data.cmake)

fs::path temp_file(const std::string& name, const std::string& content) {
  fs::path p = fs::temp_directory_path() / ("qwenrt_" + std::to_string(::getpid()) + "_" + name);
  std::ofstream(p, std::ios::binary) << content;
  return p;
}

TEST(CliText, TokenizeMatchesGoldens) {
  std::ifstream in(kData / "tokenizer/qwen3/golden_encode.jsonl");
  std::string line;
  int checked = 0;
  while (std::getline(in, line) && checked < 5) {
    auto g = nlohmann::json::parse(line);
    auto input = temp_file("tok.txt", g["text"].get<std::string>());
    auto r = run_command(cli() + " tokenize --model " + kQwen3.string() + " < " + input.string());
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(nlohmann::json::parse(r.out), g["ids"]) << g["text"];
    fs::remove(input);
    ++checked;
  }
  EXPECT_EQ(checked, 5);
}

TEST(CliText, TokenizeRejectsInvalidUtf8) {
  auto input = temp_file("bad.txt", "abc\xff\xfe");
  auto r = run_command(cli() + " tokenize --model " + kQwen3.string() + " < " + input.string());
  EXPECT_NE(r.status, 0);
  EXPECT_LT(r.status, 128);
  EXPECT_NE(r.err.find("UTF-8"), std::string::npos) << r.err;
  fs::remove(input);
}

TEST(CliText, TemplatePrintsExactlyTheRenderedPrompt) {
  auto goldens = nlohmann::ordered_json::parse(std::ifstream(kData / "chat_template/chat_template_goldens.json"));
  int checked = 0;
  for (const auto& [name, g] : goldens["qwen3"].items()) {
    auto req = temp_file("req.json", g["context"].dump());
    auto r = run_command(cli() + " template --model " + kQwen3.string() + " --request " + req.string());
    fs::remove(req);
    if (g.contains("error")) continue;
    ASSERT_EQ(r.status, 0) << name << ": " << r.err;
    EXPECT_EQ(r.out, g["expected"].get<std::string>()) << name;
    ++checked;
  }
  EXPECT_GT(checked, 3);
}

TEST(CliText, TemplateErrorsAreClear) {
  auto req = temp_file("req.json", R"({"messages": []})");
  auto r = run_command(cli() + " template --model " + kQwen3.string() + " --request " + req.string());
  EXPECT_NE(r.status, 0);
  EXPECT_LT(r.status, 128);
  EXPECT_FALSE(r.err.empty());
  auto bad = temp_file("bad.json", "{nope");
  r = run_command(cli() + " template --model " + kQwen3.string() + " --request " + bad.string());
  EXPECT_NE(r.err.find("invalid JSON"), std::string::npos) << r.err;
  r = run_command(cli() + " tokenize --model /nonexistent < /dev/null");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("/nonexistent"), std::string::npos) << r.err;
  fs::remove(req);
  fs::remove(bad);
}

}  // namespace
}  // namespace qwenrt
