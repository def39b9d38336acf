// UTF-8 handling, Unicode properties and NFC against Hugging Face tokenizers' normalizer.
#include <gtest/gtest.h>

#include "text/tokenizer/tokenizer_test_data.h"
#include "text/unicode/unicode_data.h"
#include "text/unicode/unicode_normalize.h"
#include "text/unicode/unicode_utf8.h"

namespace qwenrt::text {
namespace {

using test::read_jsonl;
using test::tokenizer_data_dir;

TEST(Utf8, FindsFirstIllFormedByte) {
  EXPECT_EQ(utf8::find_invalid("plain ascii text, long enough for the fast path"), std::nullopt);
  EXPECT_EQ(utf8::find_invalid("h\xC3\xA9llo \xF0\x9F\x99\x82"), std::nullopt);
  EXPECT_EQ(utf8::find_invalid("abc\x80"), 3u);           // stray continuation byte
  EXPECT_EQ(utf8::find_invalid("ab\xC3"), 2u);            // truncated sequence
  EXPECT_EQ(utf8::find_invalid("\xC0\xAF"), 0u);          // overlong '/'
  EXPECT_EQ(utf8::find_invalid("\xE0\x80\xAF"), 0u);      // overlong 3-byte
  EXPECT_EQ(utf8::find_invalid("x\xED\xA0\x80"), 1u);     // UTF-16 surrogate D800
  EXPECT_EQ(utf8::find_invalid("\xF4\x90\x80\x80"), 0u);  // above U+10FFFF
  EXPECT_EQ(utf8::find_invalid("\xF5\x80\x80\x80"), 0u);
  EXPECT_EQ(utf8::find_invalid("12345678\xFF"), 8u);                    // after the ASCII fast path
  EXPECT_EQ(utf8::find_invalid(std::string("a\0b", 3)), std::nullopt);  // NUL is valid
}

TEST(Utf8, RepairReplacesEachMaximalSubpart) {
  // Expected values are Python's bytes.decode("utf-8", errors="replace").
  EXPECT_EQ(utf8::repair_lossy("ok"), "ok");
  EXPECT_EQ(utf8::repair_lossy("\xD9"), "\uFFFD");
  EXPECT_EQ(utf8::repair_lossy("\xE4\xB8"), "\uFFFD");  // one subpart of 2 bytes
  EXPECT_EQ(utf8::repair_lossy("\xE4\xB8x"), "\uFFFDx");
  EXPECT_EQ(utf8::repair_lossy("\x80\x80"), "\uFFFD\uFFFD");
  EXPECT_EQ(utf8::repair_lossy("\xED\xA0\x80"), "\uFFFD\uFFFD\uFFFD");  // surrogate: 3 subparts
  EXPECT_EQ(utf8::repair_lossy("\xF0\x9F\x99"), "\uFFFD");
  EXPECT_EQ(utf8::repair_lossy("\xF0\x9F\x99\x82\xF0"), "\U0001F642\uFFFD");
  EXPECT_EQ(utf8::repair_lossy("\xC0\xAF"), "\uFFFD\uFFFD");
}

TEST(Utf8, DecodeLossyAgreesWithRepair) {
  for (std::string_view bytes : {std::string_view("ok"), std::string_view("\xD9"), std::string_view("\xE4\xB8x"), std::string_view("\x80\x80"),
                                 std::string_view("\xED\xA0\x80"), std::string_view("\xF0\x9F\x99\x82\xF0"), std::string_view("\xC0\xAF"),
                                 std::string_view("caf\xC3\xA9 \xE2\x82\xAC")}) {
    const std::u32string cps = utf8::decode_lossy(bytes);
    std::string back;
    for (char32_t c : cps) utf8::append(back, c);
    EXPECT_EQ(back, utf8::repair_lossy(bytes));
    EXPECT_EQ(utf8::count_lossy(bytes), cps.size());
  }
  EXPECT_EQ(utf8::decode_lossy("\xF0\x9F\x99\x82\xF0"), std::u32string(U"\U0001F642\uFFFD"));
  EXPECT_EQ(utf8::decode_lossy("caf\xC3\xA9"), std::u32string(U"caf\u00E9"));
}

TEST(UnicodeData, CategoriesFollowUnicode16) {
  using unicode_data::GeneralCategory;
  EXPECT_EQ(unicode_data::general_category(U'a'), GeneralCategory::Ll);
  EXPECT_EQ(unicode_data::general_category(U'\u0301'), GeneralCategory::Mn);
  EXPECT_EQ(unicode_data::general_category(U'\u0663'), GeneralCategory::Nd);
  EXPECT_EQ(unicode_data::general_category(U'\u1C89'), GeneralCategory::Lu);  // new in 16.0
  EXPECT_EQ(unicode_data::general_category(0x105C0), GeneralCategory::Lo);    // Todhri, 16.0
  EXPECT_EQ(unicode_data::general_category(0x0378), GeneralCategory::Cn);     // unassigned
  EXPECT_EQ(unicode_data::general_category(0xD800), GeneralCategory::Cs);
  EXPECT_EQ(unicode_data::general_category(0x10FFFF), GeneralCategory::Cn);
  EXPECT_EQ(unicode_data::general_category(0x110000), GeneralCategory::Cn);
  EXPECT_TRUE(unicode_data::is_white_space(U'\u3000'));
  EXPECT_TRUE(unicode_data::is_white_space(U'\u0085'));
  EXPECT_FALSE(unicode_data::is_white_space(U'\u180E'));
  EXPECT_FALSE(unicode_data::is_white_space(U'\u200B'));
  EXPECT_EQ(unicode_data::simple_case_fold(U'\u017F'), U's');
  EXPECT_EQ(unicode_data::simple_case_fold(U'\u212A'), U'k');
  EXPECT_EQ(unicode_data::simple_case_fold(U'x'), U'x');
}

TEST(Nfc, HandWrittenCases) {
  EXPECT_EQ(to_nfc("cafe\u0301"), "caf\u00e9");
  EXPECT_EQ(to_nfc("a\u0323\u0302"), "\u1EAD");       // reorder not needed, two steps
  EXPECT_EQ(to_nfc("a\u0302\u0323"), "\u1EAD");       // canonical reordering first
  EXPECT_EQ(to_nfc("\u1100\u1161\u11A8"), "\uAC01");  // Hangul L V T
  EXPECT_EQ(to_nfc("\u0915\u093C"), "\u0915\u093C");  // U+0958 is a composition exclusion
  EXPECT_EQ(to_nfc("\u0958"), "\u0915\u093C");
  EXPECT_EQ(to_nfc("\u212B"), "\u00C5");    // singleton ANGSTROM SIGN
  EXPECT_EQ(to_nfc("\u0301a"), "\u0301a");  // leading mark stays
  EXPECT_TRUE(is_nfc_quick("plain text \u00e9\u4e2d"));
  EXPECT_FALSE(is_nfc_quick("e\u0301"));
}

// Every probe of every character with normalization data, plus the golden corpus, against
// HF tokenizers' NFC (which uses Unicode 9.0 data; see tools/text/make_unicode_tables.py).
TEST(Nfc, MatchesHuggingFaceOnAllGoldens) {
  const auto rows = read_jsonl(tokenizer_data_dir() / "nfc_goldens.jsonl");
  ASSERT_GT(rows.size(), 20000u);
  int failures = 0;
  for (const auto& row : rows) {
    const std::string text = row["text"];
    const std::string expected = row["nfc"];
    if (to_nfc(text) != expected && ++failures <= 10) {
      ADD_FAILURE() << "NFC mismatch for " << nlohmann::json(text).dump();
    }
    if (is_nfc_quick(text) && text != expected && failures <= 10) {
      ADD_FAILURE() << "quick check wrongly says NFC: " << nlohmann::json(text).dump();
    }
  }
  EXPECT_EQ(failures, 0);
}

}  // namespace
}  // namespace qwenrt::text
