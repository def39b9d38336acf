// The BPE merge loop: both strategies (scan for short pieces, heap for long ones) must give
// identical ids, including on long and repetitive pieces where equal ranks compete.
#include "text/tokenizer/tokenizer_bpe.h"

#include <gtest/gtest.h>

#include <fstream>
#include <random>

#include "text/tokenizer/tokenizer_byte_level.h"
#include "text/tokenizer/tokenizer_test_data.h"

namespace qwenrt::text {
namespace {

BpeModel tiny_model() {
  std::vector<BpeVocabEntry> vocab;
  for (int b = 0; b < 256; ++b) vocab.push_back({std::string(1, static_cast<char>(b)), b});
  int32_t next = 256;
  std::vector<BpeMerge> merges = {{"a", "a"}, {"aa", "a"}, {"b", "c"}, {"a", "bc"}, {"aa", "aa"}};
  for (const auto& m : merges) vocab.push_back({m.left + m.right, next++});
  vocab.push_back({"abcx", next++});  // no merge produces it
  return BpeModel::build(std::move(vocab), merges, false, "tiny");
}

std::vector<int32_t> scan(const BpeModel& m, std::string_view s) {
  std::vector<int32_t> out;
  m.merge_by_scan(s, out);
  return out;
}
std::vector<int32_t> heap(const BpeModel& m, std::string_view s) {
  std::vector<int32_t> out;
  m.merge_by_heap(s, out);
  return out;
}

TEST(Bpe, LowestRankFirstLeftmostOnTies) {
  const BpeModel m = tiny_model();
  // "aaa": (a,a) rank 0 at positions 0 and 1 -> leftmost: "aa" "a" -> (aa,a) rank 1 -> "aaa".
  EXPECT_EQ(scan(m, "aaa"), (std::vector<int32_t>{257}));
  // "aaaa": aa aa -> (aa,aa) rank 4 -> id 260; (aa,a) does not apply to aa|aa.
  EXPECT_EQ(scan(m, "aaaa"), (std::vector<int32_t>{260}));
  EXPECT_EQ(scan(m, "abc"), (std::vector<int32_t>{259}));
  for (const char* s : {"aaa", "aaaa", "aaaaa", "abcabc", "aabcaa", "x", "abcx"}) {
    EXPECT_EQ(scan(m, s), heap(m, s)) << s;
  }
}

TEST(Bpe, TokensWithoutMergesAreNotShortCut) {
  const BpeModel m = tiny_model();
  std::vector<int32_t> out;
  m.encode_piece("abcx", out);  // in the vocab, but BPE cannot produce it
  EXPECT_EQ(out, (std::vector<int32_t>{259, 'x'}));
}

TEST(Bpe, BuildRejectsInconsistentFiles) {
  std::vector<BpeVocabEntry> vocab;
  for (int b = 0; b < 256; ++b) vocab.push_back({std::string(1, static_cast<char>(b)), b});
  EXPECT_THROW(BpeModel::build(vocab, {{"a", "b"}}, false, "f"), TokenizerError);  // "ab" missing
  auto missing_byte = vocab;
  missing_byte.pop_back();
  EXPECT_THROW(BpeModel::build(missing_byte, {}, false, "f"), TokenizerError);
  auto duplicate_id = vocab;
  duplicate_id.push_back({"zz", 5});
  EXPECT_THROW(BpeModel::build(duplicate_id, {}, false, "f"), TokenizerError);
}

// The real Qwen3 vocab and merges, built directly (not through the loader) so both merge
// strategies can be called on the same model.
const BpeModel& qwen3_model() {
  static const BpeModel model = [] {
    std::ifstream in(test::tokenizer_data_dir() / "qwen3" / "tokenizer.json", std::ios::binary);
    const auto root = nlohmann::json::parse(in);
    std::vector<BpeVocabEntry> vocab;
    for (const auto& [token, id] : root["model"]["vocab"].items()) {
      vocab.push_back({*byte_level::decode_token(token), id.get<int32_t>()});
    }
    std::vector<BpeMerge> merges;
    for (const auto& m : root["model"]["merges"]) {
      merges.push_back({*byte_level::decode_token(m[0].get<std::string>()), *byte_level::decode_token(m[1].get<std::string>())});
    }
    return BpeModel::build(std::move(vocab), merges, false, "qwen3");
  }();
  return model;
}

TEST(Bpe, ScanAndHeapAgreeOnQwen3Vocab) {
  const BpeModel& m = qwen3_model();
  std::mt19937 rng(7);
  const std::string alphabet = "aaaaabbcdeeeeefghiiijklmnooopqrstuuvwxyz  ..--__\xc3\xa9\xe4\xb8\xad";
  for (int i = 0; i < 2000; ++i) {
    std::string s;
    const int n = 1 + static_cast<int>(rng() % 250);
    for (int k = 0; k < n; ++k) s += alphabet[rng() % alphabet.size()];
    ASSERT_EQ(scan(m, s), heap(m, s)) << s;
  }
  for (const std::string& s : {std::string(250, 'a'), std::string(250, ' '), std::string(251, '-')}) {
    EXPECT_EQ(scan(m, s), heap(m, s));
  }
}

TEST(Bpe, EveryQwen3TokenEncodesToItself) {
  // Property of the Qwen3 file (reference doc 1.1); checks vocab, merges and both strategies.
  const BpeModel& m = qwen3_model();
  int checked = 0;
  for (int32_t id = 0; id < m.id_limit(); ++id) {
    const std::string* bytes = m.bytes_of(id);
    if (bytes == nullptr) continue;
    ++checked;
    ASSERT_EQ(heap(m, *bytes), std::vector<int32_t>{id}) << id;
    if (bytes->size() <= 256) ASSERT_EQ(scan(m, *bytes), std::vector<int32_t>{id}) << id;
  }
  EXPECT_EQ(checked, 151643);
  EXPECT_EQ(m.merge_count(), 151387u);
}

TEST(Bpe, PathologicalPieceIsFast) {
  const BpeModel& m = qwen3_model();
  std::vector<int32_t> out;
  m.encode_piece(std::string(1 << 20, 'a'), out);  // one megabyte, one piece
  std::string back;
  for (const int32_t id : out) back += *m.bytes_of(id);
  EXPECT_EQ(back, std::string(1 << 20, 'a'));
}

}  // namespace
}  // namespace qwenrt::text
