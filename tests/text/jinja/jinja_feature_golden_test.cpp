// Jinja-subset conformance: small templates covering whitespace control, literals, operators, attribute
// access, string methods, filters, tests, loops, scoping, macros and error behaviour, each compared with
// the output (or error) of transformers' own jinja2 environment. Goldens made by
// tools/text/chat_template_goldens.py.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "text/jinja/jinja_template.h"

namespace qwenrt::text::jinja {
namespace {

using json = nlohmann::ordered_json;

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// Python exception class recorded in the golden -> the error kind the interpreter must raise.
bool kind_matches(const std::string& python_type, const std::string& message, ErrorKind kind) {
  if (python_type == "TemplateError") return kind == ErrorKind::Raised;
  if (python_type == "UndefinedError") return kind == ErrorKind::Undefined;
  if (python_type == "SecurityError") return kind == ErrorKind::Security;
  if (python_type == "TemplateSyntaxError" || python_type == "TemplateAssertionError" || python_type == "SyntaxError") {
    return kind == ErrorKind::Syntax;
  }
  if (python_type == "TemplateRuntimeError") return kind == ErrorKind::Runtime;
  if (message.find("no loader") != std::string::npos) return kind == ErrorKind::Unsupported;  // include/extends
  return kind == ErrorKind::Type;  // TypeError, ValueError, ZeroDivisionError, OverflowError
}

TEST(JinjaFeatureGolden, MatchesJinja2AsConfiguredByTransformers) {
  const json goldens = json::parse(read_file(std::string(QWENRT_SOURCE_DIR) + "/tests/data/chat_template/jinja_feature_goldens.json"));
  const json& context = goldens["context"];
  int checked = 0;
  for (const auto& c : goldens["cases"]) {
    const std::string source = c["template"].get<std::string>();
    SCOPED_TRACE(c["name"].get<std::string>() + ": " + source);
    ++checked;
    if (c.contains("expected")) {
      try {
        EXPECT_EQ(Template::parse(source).render(context), c["expected"].get<std::string>());
      } catch (const TemplateError& e) {
        ADD_FAILURE() << "unexpected error: " << e.what();
      }
      continue;
    }
    const std::string type = c["error"]["type"].get<std::string>();
    const std::string message = c["error"]["message"].get<std::string>();
    try {
      Template::parse(source).render(context);
      ADD_FAILURE() << "expected " << type << ": " << message;
    } catch (const TemplateError& e) {
      EXPECT_TRUE(kind_matches(type, message, e.kind())) << "got " << e.what() << "; jinja2: " << type << ": " << message;
      if (type == "TemplateError") {
        EXPECT_EQ(e.message(), message);
      }
      if (c["error"].contains("line")) {
        EXPECT_EQ(e.line(), c["error"]["line"].get<int>()) << e.what();
      }
    }
  }
  EXPECT_GE(checked, 150);
}

}  // namespace
}  // namespace qwenrt::text::jinja
