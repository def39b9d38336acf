// Streaming output: complete UTF-8 only, stop strings across chunk boundaries, reasoning split,
// Qwen 3.5 XML tool calls.
#include <gtest/gtest.h>

#include "text/output/reasoning_splitter.h"
#include "text/output/text_stream.h"
#include "text/output/tool_call_parser.h"

namespace qwenrt::text {
namespace {

// Feeds `chunks` and returns everything emitted, checking each piece is valid UTF-8.
std::string feed(TextStream& s, const std::vector<std::string>& chunks) {
  std::string all;
  for (const auto& c : chunks) {
    std::string piece = s.push(c);
    EXPECT_EQ(sanitize_utf8(piece, false), piece) << "emitted invalid UTF-8";
    all += piece;
  }
  return all + s.finish();
}

TEST(TextStream, HoldsSplitCharactersUntilComplete) {
  TextStream s;
  EXPECT_EQ(s.push("a\xD9"), "a");  // Arabic ٣ = D9 A3 split across tokens
  EXPECT_EQ(s.push("\xA3"), "\xD9\xA3");
  EXPECT_EQ(s.push("\xF0\x9F"), "");  // half an emoji
  EXPECT_EQ(s.push("\x98\x80!"), "\xF0\x9F\x98\x80!");
  EXPECT_EQ(s.push("\xE4\xB8"), "");
  EXPECT_EQ(s.finish(), "\xEF\xBF\xBD") << "an incomplete tail becomes U+FFFD at the end";
}

TEST(TextStream, ReplacesImpossibleBytesAtOnce) {
  TextStream s;
  EXPECT_EQ(s.push("x\x80y"), "x\xEF\xBF\xBDy");
  EXPECT_EQ(s.push("\xC0\xAF"), "\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(s.push("\xE0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD");
}

TEST(TextStream, StopStringAcrossChunks) {
  TextStream s({"STOP", "\n\nUser:"});
  EXPECT_EQ(feed(s, {"Hello ", "wor", "ld ST", "O", "P and more"}), "Hello world ");
  EXPECT_TRUE(s.stopped());
  EXPECT_EQ(s.stop_hit(), "STOP");
  EXPECT_EQ(s.push("anything"), "");

  TextStream t({"STOP"});
  EXPECT_EQ(t.push("ST"), "");
  EXPECT_EQ(t.push("ATE"), "STATE") << "a held prefix is released when it stops matching";
  EXPECT_EQ(t.push("S"), "");
  EXPECT_EQ(t.finish(), "S");
  EXPECT_FALSE(t.stopped());
}

TEST(TextStream, MultibyteStopString) {
  TextStream s({"终了"});
  EXPECT_EQ(feed(s, {"前\xE7\xBB", "\x88", "了后"}), "前");
  EXPECT_TRUE(s.stopped());
}

TextDelta split_all(bool start_in_reasoning, const std::vector<std::string>& chunks) {
  ReasoningSplitter r(start_in_reasoning);
  TextDelta all;
  for (const auto& c : chunks) {
    auto d = r.push(c);
    all.reasoning += d.reasoning;
    all.content += d.content;
  }
  auto d = r.finish();
  return {all.reasoning + d.reasoning, all.content + d.content};
}

TEST(ReasoningSplitter, Qwen35StartsInsideThinking) {
  auto d = split_all(true, {"Let me th", "ink.\nOK.\n</th", "ink>\n\nThe answer", " is 4."});
  EXPECT_EQ(d.reasoning, "Let me think.\nOK.");
  EXPECT_EQ(d.content, "The answer is 4.");
}

TEST(ReasoningSplitter, Qwen3OpensItsOwnTag) {
  auto d = split_all(false, {"<thi", "nk>\nhmm\n</think>\n\nHi"});
  EXPECT_EQ(d.reasoning, "hmm");
  EXPECT_EQ(d.content, "Hi");
  auto plain = split_all(false, {"No tags <think> here"});
  EXPECT_EQ(plain.content, "No tags <think> here");
  EXPECT_EQ(plain.reasoning, "");
}

TEST(ReasoningSplitter, UnfinishedReasoningStaysReasoning) {
  auto d = split_all(true, {"still thinking\n"});
  EXPECT_EQ(d.reasoning, "still thinking");
  EXPECT_EQ(d.content, "");
}

TEST(ToolCalls, ParsesQwen35XmlWithSchemaTypes) {
  const nlohmann::ordered_json tools = nlohmann::ordered_json::parse(R"([{"type":"function","function":{"name":"get_weather",
    "parameters":{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"},
    "metric":{"type":"boolean"},"extra":{"type":"object"}}}}}])");
  const std::string text =
      "Let me check.\n\n<tool_call>\n<function=get_weather>\n<parameter=city>\nNew York\n</parameter>\n<parameter=days>\n3\n"
      "</parameter>\n<parameter=metric>\nTrue\n</parameter>\n<parameter=extra>\n{\"a\": [1, 2]}\n</parameter>\n</function>\n"
      "</tool_call>\n<tool_call>\n<function=get_weather>\n<parameter=city>\nmulti\nline\n</parameter>\n</function>\n</tool_call>";
  auto p = parse_tool_calls(text, tools);
  EXPECT_EQ(p.content, "Let me check.");
  ASSERT_EQ(p.calls.size(), 2u);
  EXPECT_EQ(p.calls[0].name, "get_weather");
  EXPECT_EQ(p.calls[0].arguments.dump(), R"({"city":"New York","days":3,"metric":true,"extra":{"a":[1,2]}})");
  EXPECT_EQ(p.calls[1].arguments["city"], "multi\nline");
}

TEST(ToolCalls, MalformedCallsStayText) {
  auto p = parse_tool_calls("hi <tool_call>\nnot a call\n</tool_call>");
  EXPECT_TRUE(p.calls.empty());
  EXPECT_EQ(p.content, "hi <tool_call>\nnot a call\n</tool_call>");
  auto q = parse_tool_calls("<tool_call>\n<function=f>\n<parameter=x>\n5\n</parameter>\n</function>");  // cut off at the end
  ASSERT_EQ(q.calls.size(), 1u);
  EXPECT_EQ(q.calls[0].arguments["x"], "5") << "no schema: values stay strings";
}

}  // namespace
}  // namespace qwenrt::text
