// Focused checks of the Jinja interpreter's building blocks: Python number/string formatting, json.dumps,
// Unicode case mapping, whitespace control, error kinds and line numbers.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>

#include "text/jinja/jinja_json.h"
#include "text/jinja/jinja_pyformat.h"
#include "text/jinja/jinja_template.h"
#include "text/jinja/jinja_unicode.h"

namespace qwenrt::text::jinja {
namespace {

using json = nlohmann::ordered_json;

std::string render(const std::string& source, const json& context = json::object()) { return Template::parse(source).render(context); }

TemplateError render_error(const std::string& source, const json& context = json::object()) {
  try {
    render(source, context);
  } catch (const TemplateError& e) {
    return e;
  }
  ADD_FAILURE() << "no error for: " << source;
  return TemplateError(ErrorKind::Runtime, "none");
}

TEST(JinjaPyFormat, FloatReprMatchesPython) {
  EXPECT_EQ(python_float_repr(1.0), "1.0");
  EXPECT_EQ(python_float_repr(0.1), "0.1");
  EXPECT_EQ(python_float_repr(0.1 + 0.2), "0.30000000000000004");
  EXPECT_EQ(python_float_repr(1e16), "1e+16");
  EXPECT_EQ(python_float_repr(1e15), "1000000000000000.0");
  EXPECT_EQ(python_float_repr(1e-5), "1e-05");
  EXPECT_EQ(python_float_repr(0.0001), "0.0001");
  EXPECT_EQ(python_float_repr(-0.0), "-0.0");
  EXPECT_EQ(python_float_repr(1.5e300), "1.5e+300");
  EXPECT_EQ(python_float_repr(123456.789), "123456.789");
  EXPECT_EQ(python_float_repr(INFINITY), "inf");
  EXPECT_EQ(python_float_repr(NAN), "nan");
}

TEST(JinjaPyFormat, StringReprMatchesPython) {
  EXPECT_EQ(python_string_repr("abc"), "'abc'");
  EXPECT_EQ(python_string_repr("it's"), "\"it's\"");
  EXPECT_EQ(python_string_repr("both ' and \""), "'both \\' and \"'");
  EXPECT_EQ(python_string_repr("a\nb\t\x07\\"), "'a\\nb\\t\\x07\\\\'");
  EXPECT_EQ(python_string_repr("é😀"), "'é😀'");
  EXPECT_EQ(python_string_repr("\xc2\xa0\xe2\x80\x8b"), "'\\xa0\\u200b'");  // NBSP, zero-width space
}

TEST(JinjaJson, DumpsLikePythonJsonWithTransformersDefaults) {
  const Value v = value_from_json(json::parse(R"({"b": [1, 2.5, null, true], "a": "ü\n\"<&>\u2028", "e": {}, "f": []})"));
  EXPECT_EQ(python_json_dumps(v), R"({"b": [1, 2.5, null, true], "a": "ü\n\"<&>)"
                                  "\xe2\x80\xa8"
                                  R"(", "e": {}, "f": []})");
  JsonDumpOptions indented;
  indented.indent = "  ";
  EXPECT_EQ(python_json_dumps(value_from_json(json::parse(R"({"a": [1, {}]})")), indented), "{\n  \"a\": [\n    1,\n    {}\n  ]\n}");
  JsonDumpOptions ascii;
  ascii.ensure_ascii = true;
  EXPECT_EQ(python_json_dumps(Value::string("é😀\x7f"), ascii), R"("\u00e9\ud83d\ude00\u007f")");
  EXPECT_EQ(python_json_dumps(Value::number(1e20)), "1e+20");
  EXPECT_THROW(python_json_dumps(Value()), TemplateError);
}

TEST(JinjaUnicode, CaseMappingFollowsCPython) {
  EXPECT_EQ(unicode::upper("straße"), "STRASSE");
  EXPECT_EQ(unicode::lower("ΣΑΣ"), "σας");  // final sigma
  EXPECT_EQ(unicode::lower("İ"), "i\xcc\x87");
  EXPECT_EQ(unicode::title("hello wORLD ǆ"), "Hello World ǅ");
  EXPECT_EQ(unicode::capitalize("ǆemal"), "ǅemal");
  EXPECT_TRUE(unicode::is_space(0x3000));
  EXPECT_FALSE(unicode::is_space(0x200B));
  EXPECT_EQ(unicode::code_point_count("héllo😀"), 6u);
}

TEST(JinjaLexer, TransformersWhitespaceSettings) {
  // trim_blocks removes the newline after a block tag; lstrip_blocks the indentation before it.
  EXPECT_EQ(render("a\n  {% if true %}\n  b\n  {% endif %}\nc"), "a\n  b\nc");
  // Variables are not affected by lstrip/trim.
  EXPECT_EQ(render("  {{ 'x' }}\n"), "  x");
  // One trailing newline of the source is dropped (keep_trailing_newline=False).
  EXPECT_EQ(render("x\n\n"), "x\n");
  EXPECT_EQ(render("x  {%- if true -%}  y  {%- endif %}"), "xy");
  EXPECT_EQ(render("a  {%+ if true %}b{% endif %}"), "a  b");
  EXPECT_EQ(render("{% raw %}{{ x }}{% endraw %}"), "{{ x }}");
  EXPECT_EQ(render("x\r\ny"), "x\ny");
}

TEST(JinjaErrors, SyntaxErrorsCarryLineNumbers) {
  TemplateError e = render_error("line1\n{% if x %}\nline3\n{% endfor %}");
  EXPECT_EQ(e.kind(), ErrorKind::Syntax);
  EXPECT_EQ(e.line(), 4);
  EXPECT_NE(std::string(e.what()).find("endfor"), std::string::npos);

  e = render_error("ok\n\n{{ x | no_such_filter }}");
  EXPECT_EQ(e.kind(), ErrorKind::Syntax);
  EXPECT_EQ(e.line(), 3);
  EXPECT_NE(e.message().find("no_such_filter"), std::string::npos);

  e = render_error("{% if x %}\n\nunterminated");
  EXPECT_EQ(e.kind(), ErrorKind::Syntax);
  EXPECT_NE(e.message().find("endif"), std::string::npos);
}

TEST(JinjaErrors, UnsupportedConstructsAreNamed) {
  for (const char* tag : {"include", "extends", "import", "block", "call"}) {
    const std::string source = std::string("\n{% ") + tag + " 'x' %}";
    TemplateError e = render_error(source);
    EXPECT_EQ(e.kind(), ErrorKind::Unsupported) << tag;
    EXPECT_EQ(e.line(), 2) << tag;
    EXPECT_NE(e.message().find(tag), std::string::npos) << e.what();
  }
  TemplateError e = render_error("{{ '%s' % 1 }}");
  EXPECT_EQ(e.kind(), ErrorKind::Unsupported);
  e = render_error("\n{{ 'x'|urlize }}");
  EXPECT_EQ(e.kind(), ErrorKind::Unsupported);
  EXPECT_EQ(e.line(), 2);
}

// Python's int() of a float is unbounded; this interpreter's integers are 64-bit: a float past that
// range is an integer-overflow error (found by chat_template_fuzz: a factorial of 8.9e37), not a
// converted garbage value. Within range it truncates towards zero, from floats and float strings.
TEST(JinjaErrors, IntOfAHugeFloatIsAnOverflowError) {
  EXPECT_EQ(render("{{ 2.9|int }} {{ (-2.9)|int }} {{ '-3.7'|int }} {{ 9.2e18|int }}"), "2 -2 -3 9200000000000000000");
  for (const char* source : {"{{ 2.88889e38|int }}", "{{ (-1e19)|int }}", "{{ 9.3e18|int }}", "{{ '1e30'|int }}"}) {
    TemplateError e = render_error(source);
    EXPECT_EQ(e.kind(), ErrorKind::Unsupported) << source;
    EXPECT_NE(e.message().find("integer overflow"), std::string::npos) << e.what();
  }
}

TEST(JinjaErrors, RuntimeErrorsCarryLineNumbers) {
  TemplateError e = render_error("a\nb\n{{ raise_exception('boom') }}");
  EXPECT_EQ(e.kind(), ErrorKind::Raised);
  EXPECT_EQ(e.message(), "boom");
  EXPECT_EQ(e.line(), 3);

  e = render_error("\n{% for m in messages %}\n{{ m.content.upper() }}{% endfor %}", json::parse(R"({"messages": [{}]})"));
  EXPECT_EQ(e.kind(), ErrorKind::Undefined);
  EXPECT_EQ(e.line(), 3);
  EXPECT_EQ(e.message(), "'dict object' has no attribute 'content'");
}

TEST(JinjaSemantics, UndefinedBehavesLikeJinja2Default) {
  EXPECT_EQ(render("[{{ missing }}]"), "[]");
  EXPECT_EQ(render("{{ missing is defined }}|{{ missing|length }}|{{ missing == missing }}|{{ not missing }}"), "False|0|True|True");
  EXPECT_EQ(render("{{ d.x == 'a' }}", json::parse(R"({"d": {}})")), "False");
  EXPECT_EQ(render("{% for x in missing %}x{% endfor %}ok"), "ok");
  EXPECT_EQ(render_error("{{ missing.x }}").kind(), ErrorKind::Undefined);
}

TEST(JinjaSemantics, DictKeyOrderIsPreserved) {
  EXPECT_EQ(render("{{ d|tojson }} {{ d }}", json::parse(R"({"d": {"z": 1, "a": 2}})")), R"({"z": 1, "a": 2} {'z': 1, 'a': 2})");
}

TEST(JinjaSemantics, TemplateIsReusableAndConst) {
  const Template t = Template::parse("{% set ns = namespace(n=0) %}{% for i in xs %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}");
  EXPECT_EQ(t.render(json::parse(R"({"xs": [1, 2, 3]})")), "6");
  EXPECT_EQ(t.render(json::parse(R"({"xs": [10]})")), "10");
}

TEST(JinjaSemantics, RecursionIsBounded) {
  TemplateError e = render_error("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}");
  EXPECT_EQ(e.kind(), ErrorKind::Runtime);
}

}  // namespace
}  // namespace qwenrt::text::jinja
