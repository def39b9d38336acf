// The pre-tokenizer regex engine: construct-level checks, and the exact pieces HF tokenizers
// (Oniguruma) produces for the Qwen3, Qwen3.5 and GPT-2 split patterns on the golden corpus.
#include "text/tokenizer/tokenizer_regex.h"

#include <gtest/gtest.h>

#include <map>

#include "text/tokenizer/tokenizer_pretokenizer.h"
#include "text/tokenizer/tokenizer_test_data.h"

namespace qwenrt::text {
namespace {

using test::read_jsonl;
using test::tokenizer_data_dir;

constexpr std::string_view kQwen3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kQwen35Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

std::vector<std::string> split_with(std::string_view pattern, std::string_view text) {
  std::vector<SplitStage> stages;
  stages.push_back({Regex::compile(pattern)});
  PreTokenizer pre(std::move(stages));
  std::vector<std::string> pieces;
  pre.split(text, [&](std::string_view p) { pieces.emplace_back(p); });
  return pieces;
}

// The first match of `pattern` in `text`, as a string ("<none>" if there is none).
std::string first_match(std::string_view pattern, std::string_view text) {
  const Regex re = Regex::compile(pattern);
  DecodedText d;
  d.assign(text);
  const auto m = re.find(d, 0);
  if (!m) return "<none>";
  return std::string(text.substr(d.byte_offsets[m->begin], d.byte_offsets[m->end] - d.byte_offsets[m->begin]));
}

using Pieces = std::vector<std::string>;

TEST(Regex, AlternationIsLeftmostFirstNotLongest) {
  EXPECT_EQ(first_match("a|ab", "ab"), "a");
  EXPECT_EQ(first_match("ab|a", "ab"), "ab");
  EXPECT_EQ(first_match("x(?:a|ab)c", "xabc"), "xabc");  // backtracks into the group
}

TEST(Regex, Quantifiers) {
  EXPECT_EQ(first_match("a+", "baaa"), "aaa");
  EXPECT_EQ(first_match("a+?", "aaa"), "a");
  EXPECT_EQ(first_match("a{2}", "aaaa"), "aa");
  EXPECT_EQ(first_match("a{2,3}", "aaaa"), "aaa");
  EXPECT_EQ(first_match("a{2,}", "aaaa"), "aaaa");
  EXPECT_EQ(first_match("a{,2}b", "aaab"), "aab");
  EXPECT_EQ(first_match("a{x", "a{x"), "a{x");  // not a quantifier: literal brace
  EXPECT_EQ(first_match("(?:ab)+", "ababa"), "abab");
  EXPECT_EQ(first_match("(?:ab){1,2}?c", "ababc"), "ababc");
  EXPECT_EQ(first_match("\\d+", "x\u0663\u0664y"), "\u0663\u0664");
  EXPECT_EQ(first_match("\\s+\\S", "a \t\u3000b"), " \t\u3000b");
}

TEST(Regex, LookaheadGivesBackTheLastSpace) {
  EXPECT_EQ(first_match("\\s+(?!\\S)", "   x"), "  ");
  EXPECT_EQ(first_match("\\s+(?!\\S)", "   "), "   ");
  EXPECT_EQ(first_match("a(?=b)", "acab"), "a");
  EXPECT_EQ(split_with("a(?=b)|.", "acab"), (Pieces{"a", "c", "a", "b"}));
}

TEST(Regex, CaseInsensitiveGroupsUseCaseFolding) {
  EXPECT_EQ(first_match("(?i:'s)", "x'S"), "'S");
  EXPECT_EQ(first_match("(?i:'s)", "x'\u017F"), "'\u017F");  // LONG S folds to s
  EXPECT_EQ(first_match("(?i:ll)x", "LLx"), "LLx");
  EXPECT_EQ(first_match("(?i:l)l", "LL"), "<none>");  // the flag ends with the group
  EXPECT_EQ(first_match("a(?i)b|c", "aC"), "aC");     // Oniguruma: a(?i:b|c)
}

TEST(Regex, ClassesWithPropertiesAndNegation) {
  EXPECT_EQ(first_match("[^\\r\\n\\p{L}\\p{N}]?\\p{L}+", "  (word"), "(word");
  EXPECT_EQ(first_match("[\\p{L}\\p{M}]+", "x e\u0301\u0900y"), "x");
  EXPECT_EQ(first_match("[^\\s\\p{L}]+", "ab !?1 c"), "!?1");
  EXPECT_EQ(first_match("[\\P{L}]+", "ab12c"), "12");
  EXPECT_EQ(first_match("[a-c-]+", "zb-a-d"), "b-a-");
  EXPECT_EQ(first_match("[]a]+", "x]a]"), "]a]");
  EXPECT_EQ(first_match("\\p{Lu}\\p{Ll}", "aBc"), "Bc");
  EXPECT_EQ(first_match("\\x41\\x{1F642}\\u00e9", "A\U0001F642\u00e9"), "A\U0001F642\u00e9");
  EXPECT_EQ(first_match(".+", "ab\ncd"), "ab");  // '.' stops at newline
}

TEST(Regex, UnsupportedConstructsAreRejectedWithTheirName) {
  for (const char* pattern :
       {"^a", "a$", "\\bword", "(a)\\1", "(?<=a)b", "(?>a)", "\\w+", "\\p{Han}", "[[a]]", "[a&&b]", "(?i:[a-z])", "a++", "(?x)a", "(?:a*)*"}) {
    try {
      Regex::compile(pattern);
      ADD_FAILURE() << "accepted " << pattern;
    } catch (const TokenizerError& e) {
      EXPECT_NE(std::string(e.what()).find("unsupported"), std::string::npos) << e.what();
    }
  }
  for (const char* pattern : {"(a", "a)", "[ab", "*a", "\\", "a{3,1}", "[z-a]", "\\xZZ"}) {
    EXPECT_THROW(Regex::compile(pattern), TokenizerError) << pattern;
  }
}

TEST(PreTokenizer, ReferenceExamples) {
  EXPECT_EQ(split_with(kQwen3Pattern, "x  y"), (Pieces{"x", " ", " y"}));
  EXPECT_EQ(split_with(kQwen3Pattern, "   x"), (Pieces{"  ", " x"}));
  EXPECT_EQ(split_with(kQwen3Pattern, "hello   "), (Pieces{"hello", "   "}));
  EXPECT_EQ(split_with(kQwen3Pattern, "a\n\n\nb"), (Pieces{"a", "\n\n\n", "b"}));
  EXPECT_EQ(split_with(kQwen3Pattern, "DON'T"), (Pieces{"DON", "'T"}));
  EXPECT_EQ(split_with(kQwen3Pattern, "123"), (Pieces{"1", "2", "3"}));
  // Qwen3.5 keeps combining marks inside the word.
  // Under Qwen3 the vowel sign is a non-letter and prefixes the next word instead.
  EXPECT_EQ(split_with(kQwen3Pattern, "\u0915\u093F\u0924"), (Pieces{"\u0915", "\u093F\u0924"}));
  EXPECT_EQ(split_with(kQwen35Pattern, "\u0915\u093F\u0924"), (Pieces{"\u0915\u093F\u0924"}));
}

TEST(PreTokenizer, MatchesHuggingFaceSplitOnAllGoldens) {
  const auto rows = read_jsonl(tokenizer_data_dir() / "pretokenize_goldens.jsonl");
  ASSERT_GT(rows.size(), 1500u);
  const std::string gpt2(kGpt2SplitPattern);
  std::map<std::string, std::string> patterns = {{"qwen3", std::string(kQwen3Pattern)}, {"qwen3.5", std::string(kQwen35Pattern)}, {"gpt2", gpt2}};
  std::map<std::string, int> checked;
  int failures = 0;
  for (const auto& row : rows) {
    const std::string name = row["pattern"];
    const std::string text = row["text"];
    const auto expected = row["pieces"].get<std::vector<std::string>>();
    ++checked[name];
    if (split_with(patterns.at(name), text) != expected && ++failures <= 10) {
      ADD_FAILURE() << name << " split differs for " << nlohmann::json(text).dump();
    }
  }
  EXPECT_EQ(failures, 0);
  EXPECT_EQ(checked.size(), 3u);
}

TEST(PreTokenizer, RemovedAndInvertedBehaviours) {
  std::vector<SplitStage> stages;
  stages.push_back({Regex::compile("\\s+"), /*remove_matches=*/true, /*invert=*/false});
  PreTokenizer removed(std::move(stages));
  Pieces pieces;
  removed.split("  a bc  d ", [&](std::string_view p) { pieces.emplace_back(p); });
  EXPECT_EQ(pieces, (Pieces{"a", "bc", "d"}));

  std::vector<SplitStage> inverted_stages;
  inverted_stages.push_back({Regex::compile("\\s+"), true, true});
  PreTokenizer inverted(std::move(inverted_stages));
  pieces.clear();
  inverted.split("  a bc  d ", [&](std::string_view p) { pieces.emplace_back(p); });
  EXPECT_EQ(pieces, (Pieces{"  ", " ", "  ", " "}));
}

TEST(PreTokenizer, LongRunsStayLinear) {
  const std::string spaces(200000, ' ');
  EXPECT_EQ(split_with(kQwen3Pattern, spaces + "x"), (Pieces{spaces.substr(1), " x"}));
  const std::string letters(200000, 'a');
  EXPECT_EQ(split_with(kQwen3Pattern, letters), (Pieces{letters}));
}

}  // namespace
}  // namespace qwenrt::text
