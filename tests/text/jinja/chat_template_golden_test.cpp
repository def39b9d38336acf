// Byte-exact comparison of qwenrt's chat-template rendering with Python transformers/jinja2 on the Qwen3
// and Qwen3.5 templates. Goldens: tests/data/chat_template/ (see README.md there for provenance).
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>

#include "text/jinja/chat_template.h"

namespace qwenrt::text {
namespace {

using json = nlohmann::ordered_json;
using jinja::ErrorKind;
using jinja::TemplateError;

std::string data_path(const std::string& name) { return std::string(QWENRT_SOURCE_DIR) + "/tests/data/chat_template/" + name; }

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot open " << path;
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

const ChatTemplate& template_named(const std::string& name) {
  static const ChatTemplate qwen3 = ChatTemplate::parse(read_file(data_path("qwen3_chat_template.jinja")));
  static const ChatTemplate qwen35 = ChatTemplate::parse(read_file(data_path("qwen3.5_chat_template.jinja")));
  return name == "qwen3" ? qwen3 : qwen35;
}

SpecialTokens tokens_from(const json& j) {
  SpecialTokens t;
  if (j.contains("eos_token")) t.eos_token = j["eos_token"].get<std::string>();
  if (j.contains("pad_token")) t.pad_token = j["pad_token"].get<std::string>();
  if (j.contains("bos_token")) t.bos_token = j["bos_token"].get<std::string>();
  return t;
}

// The goldens shipped in shared/tokenizers: contexts passed straight to template.render(**context).
TEST(ChatTemplateGolden, SharedGoldensRenderByteExact) {
  const json goldens = json::parse(read_file(data_path("chat_template_goldens.json")));
  int checked = 0;
  for (const auto& [template_name, cases] : goldens.items()) {
    for (const auto& [case_name, c] : cases.items()) {
      SCOPED_TRACE(template_name + "/" + case_name);
      const ChatTemplate& tpl = template_named(template_name);
      if (c.contains("expected")) {
        EXPECT_EQ(tpl.render(c["context"]), c["expected"].get<std::string>());
      } else {
        try {
          tpl.render(c["context"]);
          ADD_FAILURE() << "expected error: " << c["error"];
        } catch (const TemplateError& e) {
          EXPECT_EQ(e.kind(), ErrorKind::Raised);
          EXPECT_EQ(e.message(), c["error"].get<std::string>());
        }
      }
      ++checked;
    }
  }
  EXPECT_EQ(checked, 15);
}

// Requests rendered through transformers' apply_chat_template pipeline (message normalisation, reasoning
// aliases, special tokens, continue_final_message), hand-written and randomised.
TEST(ChatTemplateGolden, RequestGoldensMatchTransformers) {
  const json goldens = json::parse(read_file(data_path("request_goldens.json")));
  int rendered = 0;
  int errors = 0;
  for (const auto& c : goldens["cases"]) {
    const std::string name = c["template"].get<std::string>() + "/" + c["name"].get<std::string>();
    SCOPED_TRACE(name);
    const ChatTemplate& tpl = template_named(c["template"].get<std::string>());
    const SpecialTokens tokens = tokens_from(c["special_tokens"]);
    if (c.contains("expected")) {
      try {
        EXPECT_EQ(tpl.apply(c["request"], tokens), c["expected"].get<std::string>());
      } catch (const std::exception& e) {
        ADD_FAILURE() << "unexpected error: " << e.what();
      }
      ++rendered;
      continue;
    }
    const std::string type = c["error"]["type"].get<std::string>();
    const std::string message = c["error"]["message"].get<std::string>();
    try {
      tpl.apply(c["request"], tokens);
      ADD_FAILURE() << "expected " << type << ": " << message;
    } catch (const TemplateError& e) {
      if (type == "TemplateError") {
        EXPECT_EQ(e.kind(), ErrorKind::Raised) << e.what();
        EXPECT_EQ(e.message(), message);
      } else if (type == "UndefinedError") {
        EXPECT_EQ(e.kind(), ErrorKind::Undefined) << e.what();
      } else {
        EXPECT_EQ(e.kind(), ErrorKind::Type) << e.what() << " vs " << type << ": " << message;
      }
    } catch (const ChatRequestError& e) {
      EXPECT_EQ(type, "ValueError") << e.what();
    }
    ++errors;
  }
  EXPECT_GE(rendered, 200);
  EXPECT_GE(errors, 20);
}

TEST(ChatTemplateGolden, RaiseExceptionSurfacesTemplateMessageAndLine) {
  const ChatTemplate& tpl = template_named("qwen3.5");
  try {
    tpl.apply(json::parse(R"({"messages": [{"role": "user", "content": "q"}, {"role": "system", "content": "late"}]})"));
    FAIL() << "expected raise_exception";
  } catch (const TemplateError& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Raised);
    EXPECT_EQ(e.message(), "System message must be at the beginning.");
    EXPECT_EQ(e.line(), 85);  // the raise_exception call in the Qwen3.5 template
    EXPECT_NE(std::string(e.what()).find("template line 85"), std::string::npos);
  }
}

TEST(ChatTemplateGolden, EmptyConversationIsARequestError) {
  EXPECT_THROW(template_named("qwen3").apply(json::parse(R"({"messages": []})")), ChatRequestError);
  EXPECT_THROW(template_named("qwen3").apply(json::parse(R"({"messages": ["not an object"]})")), ChatRequestError);
  EXPECT_THROW(template_named("qwen3").apply(json::parse(R"({"no_messages": 1})")), ChatRequestError);
}

TEST(ChatTemplateGolden, ContextBuilderMirrorsTransformers) {
  SpecialTokens tokens;
  tokens.eos_token = "<|im_end|>";
  const json request = json::parse(R"({
    "messages": [{"role": "user", "content": "q", "name": null},
                 {"role": "assistant", "content": "a", "reasoning": "r"}],
    "add_generation_prompt": true, "enable_thinking": false, "tokenize": false, "eos_token": "<override>"})");
  const json context = build_chat_context(request, tokens);
  EXPECT_EQ(context["messages"][0].dump(), R"({"role":"user","content":"q"})");
  EXPECT_EQ(context["messages"][1].dump(), R"({"thinking":"r","role":"assistant","content":"a","reasoning":"r","reasoning_content":"r"})");
  EXPECT_TRUE(context["tools"].is_null());
  EXPECT_TRUE(context["documents"].is_null());
  EXPECT_EQ(context["add_generation_prompt"], true);
  EXPECT_EQ(context["enable_thinking"], false);
  EXPECT_EQ(context["eos_token"], "<override>");
  EXPECT_FALSE(context.contains("tokenize"));
}

}  // namespace
}  // namespace qwenrt::text
