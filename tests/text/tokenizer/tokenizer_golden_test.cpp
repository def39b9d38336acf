// End-to-end exactness of the Qwen3 tokenizer against Hugging Face tokenizers: every golden
// encode (ids with and without added-token matching), every golden decode, round trips, and
// the special-token lookups from tokenizer_config.json / generation_config.json.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "text/tokenizer/tokenizer_test_data.h"

namespace qwenrt::text {
namespace {

using test::qwen3_tokenizer;
using test::read_jsonl;
using test::tokenizer_data_dir;

std::string show(const std::string& text) { return nlohmann::json(text).dump().substr(0, 120); }

// Applies `check` to every row; reports the first few failures and counts them.
template <typename Check>
void for_each_row(const std::filesystem::path& file, std::size_t min_rows, Check check) {
  const auto rows = read_jsonl(file);
  ASSERT_GE(rows.size(), min_rows) << file;
  int failures = 0;
  for (const auto& row : rows) {
    if (!check(row) && ++failures > 10) break;
  }
  EXPECT_EQ(failures, 0) << file;
}

TEST(Qwen3Tokenizer, SharedGoldenEncodes) {
  const Tokenizer& tok = qwen3_tokenizer();
  for_each_row(tokenizer_data_dir() / "qwen3" / "golden_encode.jsonl", 200, [&](const auto& row) {
    const std::string text = row["text"];
    const auto ids = tok.encode(text);
    const bool ok = ids == row["ids"].template get<std::vector<int32_t>>();
    EXPECT_TRUE(ok) << "encode " << show(text);
    return ok;
  });
}

TEST(Qwen3Tokenizer, MultilingualGoldenEncodes) {
  const Tokenizer& tok = qwen3_tokenizer();
  for_each_row(tokenizer_data_dir() / "qwen3" / "golden_multilingual.jsonl", 500, [&](const auto& row) {
    const std::string text = row["text"];
    const auto ids = tok.encode(text);
    const bool ok = ids == row["ids"].template get<std::vector<int32_t>>();
    EXPECT_TRUE(ok) << "encode " << show(text);
    const bool ok_plain = tok.encode(text, /*allow_special=*/false) == row["ids_no_special"].template get<std::vector<int32_t>>();
    EXPECT_TRUE(ok_plain) << "encode without added tokens " << show(text);
    return ok && ok_plain;
  });
}

TEST(Qwen3Tokenizer, GoldenDecodes) {
  const Tokenizer& tok = qwen3_tokenizer();
  for_each_row(tokenizer_data_dir() / "qwen3" / "golden_decode.jsonl", 300, [&](const auto& row) {
    const auto ids = row["ids"].template get<std::vector<int32_t>>();
    const bool ok = tok.decode(ids) == row["text"].template get<std::string>() &&
                    tok.decode(ids, /*skip_special=*/true) == row["text_skip_special"].template get<std::string>();
    EXPECT_TRUE(ok) << "decode " << row["ids"].dump();
    return ok;
  });
}

TEST(Qwen3Tokenizer, DecodeOfEncodeIsTheNormalizedTextAndStreamsByteExact) {
  const Tokenizer& tok = qwen3_tokenizer();
  for_each_row(tokenizer_data_dir() / "qwen3" / "golden_multilingual.jsonl", 500, [&](const auto& row) {
    const auto ids = row["ids"].template get<std::vector<int32_t>>();
    // Streaming: token-by-token bytes concatenate to the one-shot bytes.
    std::string streamed;
    for (const int32_t id : ids) streamed += tok.token_bytes(id);
    const bool ok = streamed == tok.decode_bytes(ids) && tok.decode(ids) == streamed;
    EXPECT_TRUE(ok) << show(row["text"]);
    return ok;
  });
}

TEST(Qwen3Tokenizer, ReferenceExamples) {
  const Tokenizer& tok = qwen3_tokenizer();
  EXPECT_EQ(tok.encode("Hello world"), (std::vector<int32_t>{9707, 1879}));
  EXPECT_EQ(tok.encode(" Hello world"), (std::vector<int32_t>{21927, 1879}));
  EXPECT_EQ(tok.encode("x  y"), (std::vector<int32_t>{87, 220, 379}));
  EXPECT_EQ(tok.encode("cafe\u0301"), tok.encode("caf\u00e9"));
  EXPECT_EQ(tok.encode(" cafe\u0301"), (std::vector<int32_t>{51950}));
  EXPECT_EQ(tok.encode("<|im_end|>x"), (std::vector<int32_t>{151645, 87}));
  EXPECT_EQ(tok.encode("<|im_start<|im_end|>|>")[0], tok.encode("<|im_start")[0]);
  EXPECT_EQ(tok.encode("<|im_end|>", /*allow_special=*/false), (std::vector<int32_t>{27, 91, 318, 6213, 91, 29}));  // HF with encode_special_tokens
  EXPECT_EQ(tok.encode(""), std::vector<int32_t>{});
  const int32_t broken[] = {149};  // first byte of a two-byte character
  EXPECT_EQ(tok.decode(broken), "\uFFFD");
  EXPECT_EQ(tok.token_bytes(149), "\xD9");
}

TEST(Qwen3Tokenizer, SpecialTokensAndConfig) {
  const Tokenizer& tok = qwen3_tokenizer();
  EXPECT_EQ(tok.vocab_size(), 151669);
  EXPECT_EQ(tok.added_tokens().size(), 26u);
  EXPECT_EQ(tok.token_id("<|im_end|>"), 151645);
  EXPECT_EQ(tok.token_id("</think>"), 151668);
  EXPECT_EQ(tok.token_id(" the"), 279);
  EXPECT_EQ(tok.token_id("no such token at all"), std::nullopt);
  EXPECT_TRUE(tok.is_special(151643));
  EXPECT_FALSE(tok.is_special(151667));  // <think> is not special: it survives skip_special
  EXPECT_FALSE(tok.is_special(279));
  EXPECT_EQ(tok.bos_id(), std::nullopt);
  EXPECT_EQ(tok.eos_id(), 151645);
  EXPECT_EQ(tok.pad_id(), 151643);
  EXPECT_EQ(tok.stop_ids(), std::vector<int32_t>{151645});  // no generation_config.json here
  EXPECT_EQ(tok.merge_count(), 151387u);
  const int32_t ids[] = {151644, 872, 151667, 151645};
  EXPECT_EQ(tok.decode(ids, /*skip_special=*/true), "user<think>");
}

TEST(Qwen3Tokenizer, RejectsInvalidUtf8AndUnknownIds) {
  const Tokenizer& tok = qwen3_tokenizer();
  try {
    tok.encode("ok \xC3\x28 bad");
    ADD_FAILURE() << "accepted invalid UTF-8";
  } catch (const TokenizerError& e) {
    EXPECT_NE(std::string(e.what()).find("not valid UTF-8"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("byte 3"), std::string::npos) << e.what();
  }
  EXPECT_THROW(tok.encode("\xED\xA0\x80"), TokenizerError);  // an encoded surrogate
  const int32_t padded_row[] = {151700};                     // embedding padding: no token
  EXPECT_THROW(tok.decode(padded_row), TokenizerError);
  const int32_t negative[] = {-1};
  EXPECT_THROW(tok.decode(negative), TokenizerError);
  EXPECT_THROW(tok.token_bytes(151669), TokenizerError);
}

TEST(Qwen3Tokenizer, ConcurrentEncodesAgree) {
  const Tokenizer& tok = qwen3_tokenizer();
  const std::string text = "Concurrent tokenization: 中文 العربية हिन्दी 🙂 — repeated words words words.";
  const auto expected = tok.encode(text);
  std::vector<std::thread> threads;
  std::atomic<int> mismatches{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 200; ++i) {
        if (tok.encode(text + std::to_string(i % 7)).size() < expected.size()) ++mismatches;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches.load(), 0);
}

}  // namespace
}  // namespace qwenrt::text
