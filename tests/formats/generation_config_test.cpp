// generation_config.json: every field typed and ranged, errors naming the file, the field and what
// is accepted (no 32-bit wrap-around, no silently ignored wrong types).
#include "formats/generation_config.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "support/fixtures.h"

namespace qwenrt {
namespace {

using nlohmann::json;

std::string error_of(const json& j) {
  try {
    parse_generation_config(j, "gen/generation_config.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

void expect_error(const json& j, const std::vector<std::string>& parts) {
  const std::string e = error_of(j);
  ASSERT_FALSE(e.empty()) << "accepted: " << j.dump();
  EXPECT_NE(e.find("gen/generation_config.json"), std::string::npos) << e;
  for (const auto& p : parts) EXPECT_NE(e.find(p), std::string::npos) << j.dump() << " -> " << e;
}

TEST(GenerationConfig, ReadsTheReleasedFields) {
  const auto g = parse_generation_config(json::parse(R"({"bos_token_id": 248044, "do_sample": true, "eos_token_id": [248046, 248044],
      "pad_token_id": 248044, "temperature": 0.6, "top_k": 20, "top_p": 0.95, "transformers_version": "4.57.0"})"),
                                         "g");
  EXPECT_EQ(g.eos_token_ids, (std::vector<int32_t>{248046, 248044}));
  EXPECT_EQ(g.bos_token_id, 248044);
  EXPECT_EQ(g.do_sample, true);
  EXPECT_DOUBLE_EQ(*g.temperature, 0.6);
  EXPECT_EQ(g.top_k, 20);
  EXPECT_DOUBLE_EQ(*g.top_p, 0.95);
  EXPECT_FALSE(g.min_p);
  const auto single = parse_generation_config(json{{"eos_token_id", 7}, {"top_k", nullptr}}, "g");
  EXPECT_EQ(single.eos_token_ids, std::vector<int32_t>{7});
  EXPECT_FALSE(single.top_k);  // null is absent
}

TEST(GenerationConfig, TheCommittedFilesLoad) {
  for (const auto& dir : {test::fixtures_dir() / "dense_tied", test::fixtures_dir().parent_path().parent_path() / "models" / "qwen35-demo-16m"}) {
    if (!std::filesystem::exists(dir / "generation_config.json")) continue;
    EXPECT_NO_THROW(read_generation_config(dir / "generation_config.json")) << dir;
  }
}

TEST(GenerationConfig, IntegersDoNotWrap) {
  expect_error(json::parse(R"({"top_k": 4294967296})"), {"\"top_k\"", "4294967296", "[0, 16777216]"});
  expect_error(json::parse(R"({"eos_token_id": 4294983647})"), {"\"eos_token_id\"", "4294983647", "[0, 16777215]"});
  expect_error(json::parse(R"({"eos_token_id": [1, 4294983647]})"), {"\"eos_token_id[1]\"", "4294983647"});
  expect_error(json::parse(R"({"eos_token_id": 18446744073709551615})"), {"\"eos_token_id\"", "18446744073709551615"});
  expect_error(json::parse(R"({"eos_token_id": -1})"), {"\"eos_token_id\"", "-1"});
  expect_error(json::parse(R"({"top_k": -5})"), {"\"top_k\"", "-5"});
  expect_error(json::parse(R"({"pad_token_id": 4294967296})"), {"\"pad_token_id\""});
}

TEST(GenerationConfig, WrongTypesAreErrors) {
  expect_error(json::parse(R"({"top_k": "20"})"), {"\"top_k\" must be an integer", "\"20\""});
  expect_error(json::parse(R"({"top_k": 20.5})"), {"\"top_k\" must be an integer"});
  expect_error(json::parse(R"({"temperature": "0.7"})"), {"\"temperature\" must be a number in [0, 100]"});
  expect_error(json::parse(R"({"top_p": [0.9]})"), {"\"top_p\" must be a number"});
  expect_error(json::parse(R"({"do_sample": "false"})"), {"\"do_sample\" must be true or false"});
  expect_error(json::parse(R"({"eos_token_id": "2"})"), {"\"eos_token_id\" must be a token id or a list"});
  expect_error(json::parse(R"({"eos_token_id": [1, "2"]})"), {"\"eos_token_id[1]\" must be an integer"});
  expect_error(json::parse(R"({"eos_token_id": {"a": 1}})"), {"\"eos_token_id\""});
  expect_error(json::parse(R"([1, 2])"), {"must hold a JSON object"});
}

TEST(GenerationConfig, RangesAreChecked) {
  expect_error(json{{"temperature", -0.1}}, {"\"temperature\"", "[0, 100]"});
  expect_error(json{{"temperature", 1e300}}, {"\"temperature\""});
  expect_error(json{{"top_p", 0.0}}, {"\"top_p\"", "(0, 1]"});
  expect_error(json{{"top_p", 1.5}}, {"\"top_p\""});
  expect_error(json{{"min_p", 2}}, {"\"min_p\"", "[0, 1]"});
  expect_error(json{{"repetition_penalty", 0}}, {"\"repetition_penalty\"", "(0, 100]"});
  expect_error(json{{"eos_token_id", json(std::vector<int>(kMaxEosTokenIds + 1, 1))}}, {"\"eos_token_id\"", "1024"});
}

TEST(GenerationConfig, IdsOutsideTheVocabulary) {
  const auto g = parse_generation_config(json{{"eos_token_id", {5, 300}}, {"pad_token_id", 2}}, "g");
  EXPECT_NO_THROW(check_generation_token_ids(g, 301, "g"));
  try {
    check_generation_token_ids(g, 300, "gen/generation_config.json");
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("gen/generation_config.json: eos_token_id 300 is not a token id (the vocabulary has 300 tokens"),
              std::string::npos)
        << e.what();
  }
  const auto pad = parse_generation_config(json{{"pad_token_id", 300}}, "g");
  EXPECT_THROW(check_generation_token_ids(pad, 300, "g"), Error);
}

}  // namespace
}  // namespace qwenrt
