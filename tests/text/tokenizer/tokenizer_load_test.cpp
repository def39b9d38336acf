// Loading: which tokenizer.json features are accepted, and that every rejection is a
// TokenizerError naming the file and the problem. Uses small synthetic tokenizer files.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>

#include "text/tokenizer/tokenizer_byte_level.h"
#include "text/tokenizer/tokenizer_test_data.h"
#include "text/unicode/unicode_utf8.h"

namespace qwenrt::text {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string alphabet(std::string_view bytes) {
  std::string out;
  for (const char c : bytes) utf8::append(out, byte_level::byte_to_code_point(static_cast<unsigned char>(c)));
  return out;
}

// A minimal but complete byte-level BPE tokenizer.json: 256 byte tokens, a few merges.
json tiny_tokenizer() {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[alphabet(std::string(1, static_cast<char>(b)))] = b;
  json merges = json::array();
  int next = 256;
  for (const auto& [l, r] :
       std::vector<std::pair<std::string, std::string>>{{"h", "e"}, {"he", "l"}, {"hel", "l"}, {"hell", "o"}, {" ", "w"}, {"\xC3", "\xA9"}}) {
    merges.push_back(json::array({alphabet(l), alphabet(r)}));
    vocab[alphabet(l + r)] = next++;
  }
  json j;
  j["version"] = "1.0";
  j["truncation"] = nullptr;
  j["padding"] = nullptr;
  j["added_tokens"] = json::array({
      {{"id", 300}, {"content", "<|end|>"}, {"single_word", false}, {"lstrip", false}, {"rstrip", false}, {"normalized", false}, {"special", true}},
      {{"id", 301},
       {"content", "\xC3\xA9t\xC3\xA9"},
       {"single_word", false},
       {"lstrip", false},
       {"rstrip", false},
       {"normalized", true},
       {"special", false}},
  });
  j["normalizer"] = {{"type", "NFC"}};
  j["pre_tokenizer"] = {
      {"type", "Sequence"},
      {"pretokenizers", json::array({{{"type", "Split"}, {"pattern", {{"Regex", " ?\\S+|\\s+"}}}, {"behavior", "Isolated"}, {"invert", false}},
                                     {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}}})}};
  j["post_processor"] = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}};
  j["decoder"] = {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}};
  j["model"] = {{"type", "BPE"},
                {"dropout", nullptr},
                {"unk_token", nullptr},
                {"continuing_subword_prefix", ""},
                {"end_of_word_suffix", ""},
                {"fuse_unk", false},
                {"byte_fallback", false},
                {"ignore_merges", false},
                {"vocab", vocab},
                {"merges", merges}};
  return j;
}

class TokenizerLoad : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("qwenrt_tokenizer_load_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  void write(const std::string& name, const std::string& text) { std::ofstream(dir_ / name, std::ios::binary) << text; }
  void write(const std::string& name, const json& j) { write(name, j.dump()); }

  // Loads and expects a TokenizerError whose message contains each of `parts`.
  void expect_error(const std::vector<std::string>& parts) {
    try {
      Tokenizer::load(dir_);
      ADD_FAILURE() << "load succeeded";
    } catch (const TokenizerError& e) {
      for (const auto& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
    }
  }

  fs::path dir_;
};

TEST_F(TokenizerLoad, TinyTokenizerWorks) {
  write("tokenizer.json", tiny_tokenizer());
  const Tokenizer tok = Tokenizer::load(dir_);
  EXPECT_EQ(tok.encode("hello world"), (std::vector<int32_t>{259, 260, 'o', 'r', 'l', 'd'}));
  EXPECT_EQ(tok.encode("hello<|end|>"), (std::vector<int32_t>{259, 300}));
  EXPECT_EQ(tok.vocab_size(), 302);
  // Same tokenizer loaded through the file path instead of the directory.
  EXPECT_EQ(Tokenizer::load(dir_ / "tokenizer.json").encode("hello"), (std::vector<int32_t>{259}));
}

TEST_F(TokenizerLoad, NormalizedAddedTokensMatchAfterNfc) {
  write("tokenizer.json", tiny_tokenizer());
  const Tokenizer tok = Tokenizer::load(dir_);
  // "e\u0301te\u0301" becomes "\u00e9t\u00e9" under NFC, then matches the normalized token.
  EXPECT_EQ(tok.encode("e\xCC\x81te\xCC\x81"), (std::vector<int32_t>{301}));
  EXPECT_EQ(tok.encode("e\xCC\x81te\xCC\x81", /*allow_special=*/false), (std::vector<int32_t>{261, 't', 261}));
}

TEST_F(TokenizerLoad, LegacyStringMergesAndStringSplitPattern) {
  json j = tiny_tokenizer();
  json merges = json::array();
  for (const auto& m : j["model"]["merges"]) merges.push_back(m[0].get<std::string>() + " " + m[1].get<std::string>());
  j["model"]["merges"] = merges;
  j["pre_tokenizer"]["pretokenizers"][0] = {{"type", "Split"}, {"pattern", {{"String", "."}}}, {"behavior", "Removed"}, {"invert", false}};
  write("tokenizer.json", j);
  const Tokenizer tok = Tokenizer::load(dir_);
  EXPECT_EQ(tok.encode("hello.hello"), (std::vector<int32_t>{259, 259}));  // '.' is literal, removed
}

TEST_F(TokenizerLoad, ConfigFilesGiveSpecialIdsAndStopIds) {
  write("tokenizer.json", tiny_tokenizer());
  write("tokenizer_config.json", json{{"bos_token", nullptr}, {"eos_token", {{"content", "<|end|>"}, {"special", true}}}, {"pad_token", "h"}});
  write("generation_config.json", json{{"eos_token_id", json::array({300, 5, 300})}});
  const Tokenizer tok = Tokenizer::load(dir_);
  EXPECT_EQ(tok.bos_id(), std::nullopt);
  EXPECT_EQ(tok.eos_id(), 300);
  EXPECT_EQ(tok.pad_id(), 'h');
  EXPECT_EQ(tok.stop_ids(), (std::vector<int32_t>{300, 5}));
}

TEST_F(TokenizerLoad, MissingFile) {
  try {
    Tokenizer::load(dir_);
    ADD_FAILURE() << "load succeeded";
  } catch (const TokenizerError& e) {
    EXPECT_NE(std::string(e.what()).find((dir_ / "tokenizer.json").string()), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("no such file"), std::string::npos);
  }
}

TEST_F(TokenizerLoad, MalformedJson) {
  write("tokenizer.json", std::string("{\"model\": {\"type\": \"BPE\", "));
  expect_error({"tokenizer.json", "malformed JSON"});
}

TEST_F(TokenizerLoad, WrongStructure) {
  write("tokenizer.json", json{{"model", {{"type", "BPE"}, {"vocab", json::array()}, {"merges", json::array()}}}});
  expect_error({"tokenizer.json", "vocab is not an object"});
  write("tokenizer.json", json::array());
  expect_error({"tokenizer.json", "not a JSON object"});
}

TEST_F(TokenizerLoad, UnsupportedPipelinesAreNamed) {
  struct Case {
    std::function<void(json&)> edit;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {[](json& j) { j["model"]["type"] = "WordPiece"; }, "unsupported model type \"WordPiece\""},
      {[](json& j) { j["model"]["byte_fallback"] = true; }, "unsupported BPE byte_fallback"},
      {[](json& j) { j["model"]["dropout"] = 0.1; }, "unsupported BPE dropout"},
      {[](json& j) {
         j["normalizer"] = {{"type", "NFKC"}};
       },
       "unsupported normalizer \"NFKC\""},
      {[](json& j) {
         j["pre_tokenizer"] = {{"type", "Whitespace"}};
       },
       "unsupported pre_tokenizer \"Whitespace\""},
      {[](json& j) { j["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "MergedWithNext"; }, "unsupported Split behavior \"MergedWithNext\""},
      {[](json& j) { j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "\\p{Han}+"; }, "unsupported construct property \\p{Han}"},
      {[](json& j) { j["pre_tokenizer"]["pretokenizers"][1]["add_prefix_space"] = true; }, "unsupported ByteLevel add_prefix_space=true"},
      {[](json& j) { j["pre_tokenizer"]["pretokenizers"].erase(1); }, "without ByteLevel"},
      {[](json& j) {
         j["decoder"] = {{"type", "WordPiece"}};
       },
       "unsupported decoder \"WordPiece\""},
      {[](json& j) {
         j["post_processor"] = {{"type", "TemplateProcessing"}};
       },
       "unsupported post_processor \"TemplateProcessing\""},
      {[](json& j) { j["added_tokens"][0]["lstrip"] = true; }, "unsupported added token option lstrip"},
      {[](json& j) {
         j["model"]["merges"].push_back(json::array({"q", "zz"}));
       },
       "not in the vocab"},
      {[](json& j) { j["model"]["vocab"]["\xE4\xB8\xAD"] = 400; }, "not in the ByteLevel alphabet"},
  };
  for (const auto& c : cases) {
    json j = tiny_tokenizer();
    c.edit(j);
    write("tokenizer.json", j);
    SCOPED_TRACE(c.expected);
    expect_error({(dir_ / "tokenizer.json").string(), c.expected});
  }
}

TEST_F(TokenizerLoad, BadConfigNamesTheConfigFile) {
  write("tokenizer.json", tiny_tokenizer());
  write("tokenizer_config.json", json{{"eos_token", "<|nope|>"}});
  expect_error({"tokenizer_config.json", "\"eos_token\" is \"<|nope|>\", which is not a token"});
  write("tokenizer_config.json", std::string("not json"));
  expect_error({"tokenizer_config.json", "malformed JSON"});
  write("tokenizer_config.json", json::object());
  write("generation_config.json", json{{"eos_token_id", 99999}});
  expect_error({"generation_config.json", "eos_token_id 99999 is not a token id"});
}

}  // namespace
}  // namespace qwenrt::text

namespace qwenrt::text {
namespace {

// Hostile tokenizer files (docs/text.md "## Limits"): each was a crash, an "internal error" or a
// multi-gigabyte allocation before the limits existed.

TEST_F(TokenizerLoad, DeeplyNestedJsonIsRejectedBeforeParsing) {
  write("tokenizer.json", std::string(30000, '[') + std::string(30000, ']'));
  expect_error({"tokenizer.json", "nested more than 512 levels", "kMaxJsonDepth"});
}

TEST_F(TokenizerLoad, DeeplyNestedSequencePreTokenizersAreAnError) {
  json j = tiny_tokenizer();
  json p = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}};
  for (int i = 0; i < 100; ++i) p = {{"type", "Sequence"}, {"pretokenizers", json::array({p})}};
  j["pre_tokenizer"] = p;
  write("tokenizer.json", j);
  expect_error({"tokenizer.json", "kMaxPreTokenizerNesting"});
  // 30,000 levels: stopped by the JSON depth limit first.
  std::string deep;
  for (int i = 0; i < 30000; ++i) deep += R"({"type": "Sequence", "pretokenizers": [)";
  deep += R"({"type": "ByteLevel"})";
  for (int i = 0; i < 30000; ++i) deep += "]}";
  j["pre_tokenizer"] = "PLACEHOLDER";
  std::string text = j.dump();
  text.replace(text.find("\"PLACEHOLDER\""), 13, deep);
  write("tokenizer.json", text);
  expect_error({"tokenizer.json", "kMaxJsonDepth"});
}

TEST_F(TokenizerLoad, TooManySplitStagesAreAnError) {
  json j = tiny_tokenizer();
  json stages = json::array();
  for (int i = 0; i < 100; ++i) stages.push_back({{"type", "Split"}, {"pattern", {{"Regex", "\\s+"}}}, {"behavior", "Isolated"}});
  stages.push_back({{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}});
  j["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", stages}};
  write("tokenizer.json", j);
  expect_error({"tokenizer.json", "kMaxPreTokenizerStages"});
}

TEST_F(TokenizerLoad, DeeplyNestedSplitRegexIsAnError) {
  json j = tiny_tokenizer();
  j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = std::string(30000, '(') + "a" + std::string(30000, ')');
  write("tokenizer.json", j);
  expect_error({"tokenizer.json", "kMaxRegexGroupNesting"});
  j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "a" + std::string(30000, '?');
  write("tokenizer.json", j);
  expect_error({"tokenizer.json", "kMaxRegexTreeDepth"});
}

TEST_F(TokenizerLoad, HugeTokenIdsAreAnError) {
  json j = tiny_tokenizer();
  j["added_tokens"][0]["id"] = 2147483647;  // overflowed int32 (id + 1) before
  write("tokenizer.json", j);
  expect_error({"tokenizer.json", "added token \"<|end|>\"", "2147483647", "kMaxTokenId"});
  j["added_tokens"][0]["id"] = 500000000;  // 20 s and 15.8 GB before
  write("tokenizer.json", j);
  expect_error({"tokenizer.json", "500000000", "kMaxTokenId"});
  j["added_tokens"][0]["id"] = 10000000;  // below kMaxTokenId but far beyond 264 tokens
  write("tokenizer.json", j);
  expect_error({"tokenizer.json", "10000000", "kMaxTokenIdSparsity"});
  j = tiny_tokenizer();
  j["model"]["vocab"][alphabet("a")] = 4294967296LL;
  write("tokenizer.json", j);
  expect_error({"tokenizer.json", "model.vocab", "4294967296", "kMaxTokenId"});
  j["model"]["vocab"][alphabet("a")] = -5;
  write("tokenizer.json", j);
  expect_error({"tokenizer.json", "negative id"});
  j["model"]["vocab"][alphabet("a")] = 1.5;
  write("tokenizer.json", j);
  expect_error({"tokenizer.json", "non-integer id"});
}

TEST_F(TokenizerLoad, HostileSplitRegexIsBoundedPerInput) {
  // Quadratic backtracking: every search scans to the end of the input and back before matching one
  // character, just under the old per-search budget each time (87 s for 72 KB); now one budget for the
  // whole encode call.
  json j = tiny_tokenizer();
  j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "a*b|a";
  write("tokenizer.json", j);
  const auto tok = Tokenizer::load(dir_);
  const std::string input(72 * 1024, 'a');
  const auto start = std::chrono::steady_clock::now();
  try {
    tok.encode(input);
    ADD_FAILURE() << "no error";
  } catch (const TokenizerError& e) {
    EXPECT_NE(std::string(e.what()).find("backtracking budget"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("kRegexStepsPerByte"), std::string::npos) << e.what();
  }
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 20.0);
  // Short inputs still encode with the same pattern.
  EXPECT_FALSE(tok.encode("aaab").empty());
}

TEST(TokenizerLimits, RealTokenizerStaysWithinTheRegexBudgetOnLongRuns) {
  // Long runs are where split patterns backtrack most (\s*[\r\n]+, \s+(?!\S)); the per-input budget
  // must never fail on real patterns.
  const auto tok = Tokenizer::load(fs::path(QWENRT_TOKENIZER_DATA_DIR) / "qwen3");
  for (const std::string unit : {" ", "a", "1", "\n", " \n", "\t ", "!", "ü", "你", " a", "a1 ", "'s"}) {
    std::string input;
    while (input.size() < 300000) input += unit;
    EXPECT_FALSE(tok.encode(input).empty()) << unit;
  }
}

}  // namespace
}  // namespace qwenrt::text
