// Hostile templates and requests: each is bounded by a named limit (jinja_limits.h, docs/text.md
// "## Limits") and fails with an error naming it, instead of overflowing the stack, running on or
// exhausting memory. Each case crashed, hung or was OOM-killed before the limits existed.
#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "text/jinja/chat_template.h"
#include "text/jinja/jinja_template.h"

namespace qwenrt::text::jinja {
namespace {

using json = nlohmann::ordered_json;

std::string repeat(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

// Parses and renders; expects a qwenrt::Error whose message contains `expected`.
void expect_error(const std::string& source, const std::string& expected, const json& context = json::object(), const RenderLimits& limits = {}) {
  try {
    Template::parse(source).render(context, limits);
    ADD_FAILURE() << "no error; expected one containing: " << expected;
  } catch (const qwenrt::Error& e) {
    EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
  }
}

TEST(JinjaLimits, DeeplyNestedTemplatesAreSyntaxErrors) {
  const std::string limit = "kMaxTemplateNesting";
  expect_error("{{ " + repeat("(", 10000) + "1" + repeat(")", 10000) + " }}", limit);
  expect_error("{{ " + repeat("[", 10000) + "1" + repeat("]", 10000) + " }}", limit);
  expect_error("{{ " + repeat("{'a': ", 10000) + "1" + repeat("}", 10000) + " }}", limit);
  expect_error(repeat("{% for x in [1] %}", 10000) + repeat("{% endfor %}", 10000), limit);
  expect_error(repeat("{% if true %}", 10000) + repeat("{% endif %}", 10000), limit);
  expect_error("{{ " + repeat("not ", 10000) + "1 }}", limit);
  expect_error("{{ " + repeat("-", 10000) + "1 }}", limit);
  // Operator chains build trees as deep as they are long (evaluated and destroyed recursively).
  expect_error("{{ 1" + repeat(" + 1", 100000) + " }}", limit);
  expect_error("{{ x" + repeat(".a", 100000) + " }}", limit);
  expect_error("{{ x" + repeat("|string", 100000) + " }}", limit);
  // Nesting real templates use still parses.
  EXPECT_EQ(Template::parse("{{ " + repeat("(", 60) + "1" + repeat(")", 60) + " }}").render(json::object()), "1");
  EXPECT_EQ(Template::parse("{{ 1" + repeat(" + 1", 99) + " }}").render(json::object()), "100");
}

TEST(JinjaLimits, StringAndListGrowthIsBounded) {
  expect_error("{{ 'x' * 100000000000 }}", "max_string_bytes");
  expect_error("{{ ([1] * 100000000000) | length }}", "max_list_items");
  expect_error("{{ 'x' | center(10000000000) }}", "max_string_bytes");
  expect_error("{{ 'a\nb' | indent(10000000000) }}", "max_string_bytes");
  expect_error("{{ 'x'.ljust(10000000000) }}", "max_string_bytes");
  expect_error("{{ '1'.zfill(10000000000) }}", "max_string_bytes");
  expect_error("{{ [1] | tojson(indent=10000000000) }}", "max_string_bytes");
  // Doubling a string in a loop: 2^40 bytes after 40 rounds.
  expect_error("{% set ns = namespace(s='x') %}{% for i in range(60) %}{% set ns.s = ns.s + ns.s %}{% endfor %}{{ ns.s | length }}",
               "max_string_bytes");
  expect_error("{% set ns = namespace(s='x') %}{% for i in range(60) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s | length }}",
               "max_string_bytes");
  expect_error("{% set ns = namespace(s='xx') %}{% for i in range(60) %}{% set ns.s = ns.s.replace('x', 'xx') %}{% endfor %}", "max_string_bytes");
  expect_error("{% set ns = namespace(l=[1]) %}{% for i in range(60) %}{% set ns.l = ns.l + ns.l %}{% endfor %}", "max_list_items");
  // A caller's smaller limits apply.
  RenderLimits small;
  small.max_string_bytes = 100;
  expect_error("{{ 'x' * 101 }}", "max_string_bytes (100 bytes)", json::object(), small);
  EXPECT_EQ(Template::parse("{{ 'x' * 100 }}").render(json::object(), small), std::string(100, 'x'));
}

TEST(JinjaLimits, OutputAndLoopsAreBounded) {
  // Two nested range(100000) loops printing nothing: 10^10 iterations.
  expect_error("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", "max_loop_iterations");
  RenderLimits small;
  small.max_output_bytes = 1000;
  expect_error("{% for i in range(100000) %}xxxxxxxxxx{% endfor %}", "max_output_bytes (1000 bytes)", json::object(), small);
  small = {};
  small.max_loop_iterations = 10;
  expect_error("{% for i in range(11) %}{% endfor %}", "max_loop_iterations (10 iterations)", json::object(), small);
  EXPECT_EQ(Template::parse("{% for i in range(10) %}{{ i }}{% endfor %}").render(json::object(), small), "0123456789");
}

TEST(JinjaLimits, RecursionIsBounded) {
  expect_error("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", "max_call_depth");
  // A deep value built in a loop (printing and destroying it would recurse once per level).
  expect_error("{% set ns = namespace(x=[]) %}{% for i in range(100000) %}{% set ns.x = [ns.x] %}{% endfor %}{{ ns.x | length }}", "kMaxValueDepth");
  // A namespace that contains itself.
  expect_error("{% set ns = namespace(a=1) %}{% set ns.me = ns %}{{ ns }}", "kMaxValueDepth");
  expect_error("{% set ns = namespace(a=1) %}{% set ns.me = [ns] %}{{ ns }}", "kMaxValueDepth");
}

TEST(JinjaLimits, DeepContextJsonIsAnError) {
  // A request nested 30,000 deep, in a key the template never reads.
  const std::string deep = repeat("[", 30000) + repeat("]", 30000);
  json request = json::parse(R"({"messages": [{"role": "user", "content": "hi"}]})");
  request["unused"] = json::parse(deep);
  const auto tmpl = ChatTemplate::parse("{{ messages[0].content }}");
  try {
    tmpl.apply(request);
    ADD_FAILURE() << "no error";
  } catch (const qwenrt::Error& e) {
    EXPECT_NE(std::string(e.what()).find("kMaxValueDepth"), std::string::npos) << e.what();
  }
  // Rendering a deep context directly.
  json context = json::object();
  context["x"] = json::parse(deep);
  expect_error("{{ 1 }}", "kMaxValueDepth", context);
  // A realistic depth is fine.
  request["unused"] = json::parse(repeat("[", 100) + repeat("]", 100));
  EXPECT_EQ(tmpl.apply(request), "hi");
}

TEST(JinjaLimits, LoopObjectsAreFreedPerLoop) {
  // Each inner loop copies its 100000 items (~3 MB); they used to be kept until the render ended
  // (3 GB after 1,000 outer iterations). Now freed per loop: the limit on iterations is what stops
  // this render, not memory.
  const std::string source = "{% for i in range(90) %}{% for j in range(100000) %}{% endfor %}{% endfor %}done";
  EXPECT_EQ(Template::parse(source).render(json::object()), "done");
  // A loop object the template keeps (and that refers back to its scope) still works.
  EXPECT_EQ(Template::parse("{% set ns = namespace(l=none) %}{% for i in [1, 2] %}{% set ns.l = loop %}{% endfor %}{{ ns.l.length }}")
                .render(json::object()),
            "2");
}

TEST(JinjaLimits, TemplateErrorsAreQwenrtErrors) {
  try {
    Template::parse("{% if %}");
    ADD_FAILURE();
  } catch (const qwenrt::Error& e) {
    EXPECT_NE(std::string(e.what()).find("TemplateSyntaxError"), std::string::npos);
  }
  try {
    ChatTemplate::parse("x").apply(json::parse(R"({"messages": []})"));
    ADD_FAILURE();
  } catch (const qwenrt::Error& e) {
    EXPECT_NE(std::string(e.what()).find("empty conversation"), std::string::npos);
  }
}

}  // namespace
}  // namespace qwenrt::text::jinja
