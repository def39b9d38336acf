// The builtin filters (jinja2's, with transformers' tojson), applied by the interpreter.
#include "text/jinja/jinja_filters.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <unordered_map>
#include <unordered_set>

#include "text/jinja/jinja_interpreter.h"
#include "text/jinja/jinja_json.h"
#include "text/jinja/jinja_limits.h"
#include "text/jinja/jinja_methods.h"
#include "text/jinja/jinja_objects.h"
#include "text/jinja/jinja_operators.h"
#include "text/jinja/jinja_pyformat.h"
#include "text/jinja/jinja_tests.h"
#include "text/jinja/jinja_unicode.h"
#include "text/unicode/unicode_utf8.h"

namespace qwenrt::text::jinja {
namespace {

using FilterFn = std::function<Value(Interpreter&, const Value&, CallArgs&)>;

// jinja2's soft_str: strings (including Markup) pass through, everything else becomes str(value).
Value soft_str(const Value& v) { return v.is_string() ? v : Value::string(to_str(v)); }

// Keeps the Markup flag of `like` on a derived string (markupsafe methods return Markup).
Value same_flavour(const Value& like, std::string s) { return like.is_markup() ? Value::markup(std::move(s)) : Value::string(std::move(s)); }

std::int64_t int_arg(const Value& v, const char* what) {
  if (v.is_int() || v.is_bool()) return v.to_int();
  if (v.is_undefined()) v.fail_undefined();
  throw_type_error(std::string(what) + " must be an integer, not '" + type_name(v) + "'");
}

// jinja2's make_attrgetter: "a.b.0" walks getitem per part; integer-looking parts index sequences.
Value get_path(Interpreter& in, const Value& item, const Value& attribute) {
  if (!attribute.is_string()) return in.get_item(item, attribute);
  Value current = item;
  const std::string& path = attribute.as_string();
  std::size_t start = 0;
  while (true) {
    const std::size_t dot = path.find('.', start);
    const std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    const bool digits = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    current = in.get_item(current, digits ? Value::integer(std::stoll(part)) : Value::string(part));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return current;
}

// Sort key transform used by sort/unique/min/max/dictsort when case_sensitive is false.
Value fold_case(const Value& v, bool case_sensitive) {
  if (!case_sensitive && v.is_string()) return Value::string(unicode::lower(v.as_string()));
  return v;
}

std::vector<Value> sorted_copy(std::vector<Value> items, bool reverse, const std::function<Value(const Value&)>& key) {
  std::vector<std::pair<Value, Value>> keyed;
  keyed.reserve(items.size());
  for (Value& v : items) keyed.emplace_back(key(v), std::move(v));
  std::stable_sort(keyed.begin(), keyed.end(),
                   [reverse](const auto& a, const auto& b) { return reverse ? order(b.first, a.first) < 0 : order(a.first, b.first) < 0; });
  std::vector<Value> out;
  for (auto& kv : keyed) out.push_back(std::move(kv.second));
  return out;
}

// Attributes for sort/attribute=: "a,b" sorts by several keys (jinja2's make_multi_attrgetter).
std::function<Value(const Value&)> sort_key(Interpreter& in, const Value& attribute, bool case_sensitive) {
  if (attribute.is_none()) return [case_sensitive](const Value& v) { return fold_case(v, case_sensitive); };
  if (attribute.is_string() && attribute.as_string().find(',') != std::string::npos) {
    std::vector<Value> parts;
    const std::string& s = attribute.as_string();
    std::size_t start = 0;
    while (true) {
      const std::size_t comma = s.find(',', start);
      parts.push_back(Value::string(s.substr(start, comma == std::string::npos ? std::string::npos : comma - start)));
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    return [&in, parts, case_sensitive](const Value& v) {
      std::vector<Value> keys;
      for (const Value& p : parts) keys.push_back(fold_case(get_path(in, v, p), case_sensitive));
      return Value::list(std::move(keys));
    };
  }
  return [&in, attribute, case_sensitive](const Value& v) { return fold_case(get_path(in, v, attribute), case_sensitive); };
}

Value filter_default(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder a("default", args, {"default_value", "boolean"}, {Value::string(""), Value::boolean(false)});
  if (v.is_undefined() || (truthy(a[1]) && !truthy(v))) return a[0];
  return v;
}

Value filter_join(Interpreter& in, const Value& v, CallArgs& args) {
  ArgBinder a("join", args, {"d", "attribute"}, {Value::string(""), Value::none()});
  std::vector<Value> items = iterate(v);
  const std::string sep = to_str(a[0]);
  std::string out;
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i) out += sep;
    out += to_str(a[1].is_none() ? items[i] : get_path(in, items[i], a[1]));
    check_string_bytes(out.size(), "join");
  }
  return Value::string(std::move(out));
}

Value filter_trim(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder a("trim", args, {"chars"}, {Value::none()});
  CallArgs strip_args;
  if (!a[0].is_none()) strip_args.positional.push_back(a[0]);
  return call_method(soft_str(v), "strip", strip_args);
}

Value filter_tojson(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder a("tojson", args, {"ensure_ascii", "indent", "separators", "sort_keys"},
              {Value::boolean(false), Value::none(), Value::none(), Value::boolean(false)});
  JsonDumpOptions options;
  options.ensure_ascii = truthy(a[0]);
  if (a[1].is_int() || a[1].is_bool()) {
    const auto width = static_cast<std::uint64_t>(std::max<std::int64_t>(0, a[1].to_int()));
    check_string_bytes(width, "tojson(indent=...)");
    options.indent = std::string(static_cast<std::size_t>(width), ' ');
  } else if (a[1].is_string()) {
    options.indent = a[1].as_string();
  } else if (!a[1].is_none()) {
    throw_type_error("indent must be an int or a string");
  }
  if (!a[2].is_none()) {
    std::vector<Value> seps = iterate(a[2]);
    if (seps.size() != 2 || !seps[0].is_string() || !seps[1].is_string()) {
      throw_type_error("separators must be a (item_separator, key_separator) pair of strings");
    }
    options.item_separator = seps[0].as_string();
    options.key_separator = seps[1].as_string();
  }
  options.sort_keys = truthy(a[3]);
  return Value::string(python_json_dumps(v, options));
}

Value filter_items(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder a("items", args, {});
  if (v.is_undefined()) return Value::list({});
  if (!v.is_dict()) throw_type_error("Can only get item pairs from a mapping.");
  std::vector<Value> pairs;
  for (const auto& [k, val] : v.as_dict().entries()) pairs.push_back(Value::tuple({k, val}));
  return Value::list(std::move(pairs));
}

Value filter_length(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder a("length", args, {});
  if (v.is_object() && v.as_object()->type_name() == "LoopContext") {
    return *v.as_object()->attribute("length");
  }
  auto n = length_of(v);
  if (!n) throw_type_error("object of type '" + type_name(v) + "' has no len()");
  return Value::integer(static_cast<std::int64_t>(*n));
}

Value filter_first(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder a("first", args, {});
  std::vector<Value> items = iterate(v);
  if (items.empty()) return Value::undefined("No first item, sequence was empty.");
  return items.front();
}

Value filter_last(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder a("last", args, {});
  if (v.is_undefined()) v.fail_undefined();  // reversed(Undefined) raises
  std::vector<Value> items = iterate(v);
  if (items.empty()) return Value::undefined("No last item, sequence was empty.");
  return items.back();
}

Value filter_replace(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder a("replace", args, {"old", "new", "count"}, {Value::none()});
  // With autoescape off jinja2 does str(s).replace(str(old), str(new), count): a plain str.
  CallArgs method_args;
  method_args.positional = {Value::string(to_str(a[0])), Value::string(to_str(a[1]))};
  if (!a[2].is_none()) method_args.positional.push_back(a[2]);
  return call_method(Value::string(to_str(v)), "replace", method_args);
}

Value filter_reverse(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder a("reverse", args, {});
  if (v.is_string()) {
    std::u32string s = unicode::decode(v.as_string());
    std::reverse(s.begin(), s.end());
    return same_flavour(v, unicode::encode(s));
  }
  if (v.is_undefined()) v.fail_undefined();
  std::vector<Value> items = iterate(v);
  std::reverse(items.begin(), items.end());
  return Value::list(std::move(items));
}

Value filter_sort(Interpreter& in, const Value& v, CallArgs& args) {
  ArgBinder a("sort", args, {"reverse", "case_sensitive", "attribute"}, {Value::boolean(false), Value::boolean(false), Value::none()});
  return Value::list(sorted_copy(iterate(v), truthy(a[0]), sort_key(in, a[2], truthy(a[1]))));
}

Value filter_unique(Interpreter& in, const Value& v, CallArgs& args) {
  ArgBinder a("unique", args, {"case_sensitive", "attribute"}, {Value::boolean(false), Value::none()});
  auto key = sort_key(in, a[1], truthy(a[0]));
  std::vector<Value> seen;
  std::vector<Value> out;
  for (const Value& item : iterate(v)) {
    Value k = key(item);
    if (std::any_of(seen.begin(), seen.end(), [&](const Value& s) { return equals(s, k); })) continue;
    seen.push_back(k);
    out.push_back(item);
  }
  return Value::list(std::move(out));
}

Value min_max(Interpreter& in, const Value& v, CallArgs& args, bool want_max, const char* name) {
  ArgBinder a(name, args, {"case_sensitive", "attribute"}, {Value::boolean(false), Value::none()});
  auto key = sort_key(in, a[1], truthy(a[0]));
  std::vector<Value> items = iterate(v);
  if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  std::size_t best = 0;
  Value best_key = key(items[0]);
  for (std::size_t i = 1; i < items.size(); ++i) {
    Value k = key(items[i]);
    if (want_max ? order(k, best_key) > 0 : order(k, best_key) < 0) {
      best = i;
      best_key = k;
    }
  }
  return items[best];
}

Value filter_dictsort(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder a("dictsort", args, {"case_sensitive", "by", "reverse"}, {Value::boolean(false), Value::string("key"), Value::boolean(false)});
  if (!v.is_dict()) throw_type_error("dictsort expects a mapping");
  const std::string by = to_str(a[1]);
  if (by != "key" && by != "value") throw_type_error("You can only sort by either \"key\" or \"value\"");
  const bool case_sensitive = truthy(a[0]);
  std::vector<Value> pairs;
  for (const auto& [k, val] : v.as_dict().entries()) pairs.push_back(Value::tuple({k, val}));
  const std::size_t pos = by == "key" ? 0 : 1;
  return Value::list(
      sorted_copy(std::move(pairs), truthy(a[2]), [pos, case_sensitive](const Value& p) { return fold_case(p.items()[pos], case_sensitive); }));
}

Value filter_sum(Interpreter& in, const Value& v, CallArgs& args) {
  ArgBinder a("sum", args, {"attribute", "start"}, {Value::none(), Value::integer(0)});
  Value total = a[1];
  for (const Value& item : iterate(v)) {
    total = apply_binary(BinaryOp::Add, total, a[0].is_none() ? item : get_path(in, item, a[0]));
  }
  return total;
}

// Python int(str, base) / int(float(str)) parsing used by the int filter.
std::optional<std::int64_t> parse_python_int(const std::string& text, int base) {
  std::string s;
  for (char32_t c : unicode::decode(text)) {
    if (unicode::is_space(c)) {
      s.push_back(' ');
    } else {
      utf8::append(s, c);
    }
  }
  const auto b = s.find_first_not_of(' ');
  if (b == std::string::npos) return std::nullopt;
  s = s.substr(b, s.find_last_not_of(' ') - b + 1);
  std::string digits;
  std::size_t i = 0;
  bool negative = false;
  if (s[i] == '+' || s[i] == '-') negative = s[i++] == '-';
  if (i + 1 < s.size() && s[i] == '0' && base != 10) {
    const char p = static_cast<char>(std::tolower(static_cast<unsigned char>(s[i + 1])));
    if ((base == 16 && p == 'x') || (base == 8 && p == 'o') || (base == 2 && p == 'b')) i += 2;
  }
  bool last_underscore = true;
  for (; i < s.size(); ++i) {
    if (s[i] == '_') {
      if (last_underscore) return std::nullopt;
      last_underscore = true;
      continue;
    }
    last_underscore = false;
    digits.push_back(s[i]);
  }
  if (digits.empty() || last_underscore) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const long long value = std::strtoll(digits.c_str(), &end, base);
  if (*end != '\0' || errno == ERANGE) return std::nullopt;
  return negative ? -value : value;
}

std::optional<double> parse_python_float(const std::string& text) {
  std::string s;
  for (char c : text) {
    if (c != '_') s.push_back(c);
  }
  const auto b = s.find_first_not_of(" \t\n\r\f\v");
  if (b == std::string::npos) return std::nullopt;
  s = s.substr(b, s.find_last_not_of(" \t\n\r\f\v") - b + 1);
  std::string lowered = unicode::lower(s);
  if (lowered == "nan" || lowered == "+nan" || lowered == "-nan") return std::nan("");
  if (lowered == "inf" || lowered == "+inf" || lowered == "infinity" || lowered == "+infinity") return INFINITY;
  if (lowered == "-inf" || lowered == "-infinity") return -INFINITY;
  for (char c : s) {
    if (!(std::isdigit(static_cast<unsigned char>(c)) || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-')) {
      return std::nullopt;
    }
  }
  char* end = nullptr;
  const double d = std::strtod(s.c_str(), &end);
  if (*end != '\0') return std::nullopt;
  return d;
}

// A finite float truncated towards zero, as Python's int() does; Python's result is unbounded, this
// interpreter's 64-bit (a float outside that range is an error, never a converted garbage value).
Value truncated_int(double d) {
  const double t = std::trunc(d);
  if (!(t >= -9223372036854775808.0 && t < 9223372036854775808.0))
    throw_unsupported("integer overflow: int(" + python_float_repr(d) + ") is outside the 64 bits this interpreter's integers have");
  return Value::integer(static_cast<std::int64_t>(t));
}

Value filter_int(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder a("int", args, {"default", "base"}, {Value::integer(0), Value::integer(10)});
  if (v.is_int() || v.is_bool()) return Value::integer(v.to_int());
  if (v.is_float()) {
    if (!std::isfinite(v.as_float())) return a[0];
    return truncated_int(v.as_float());
  }
  if (v.is_string()) {
    if (auto i = parse_python_int(v.as_string(), static_cast<int>(int_arg(a[1], "base")))) return Value::integer(*i);
    if (auto d = parse_python_float(v.as_string()); d && std::isfinite(*d)) return truncated_int(*d);
  }
  return a[0];
}

Value filter_float(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder a("float", args, {"default"}, {Value::number(0.0)});
  if (v.is_number()) return Value::number(v.to_double());
  if (v.is_string()) {
    if (auto d = parse_python_float(v.as_string())) return Value::number(*d);
  }
  return a[0];
}

// Python round(x, n) for floats: correctly rounded, ties to even on the exact binary value, which is
// what glibc's printf produces.
double python_round(double x, std::int64_t digits) {
  if (!std::isfinite(x)) return x;
  if (digits > 300) return x;
  if (digits < 0) {
    const double scale = std::pow(10.0, static_cast<double>(-digits));
    return std::nearbyint(x / scale) * scale;
  }
  char buf[512];
  std::snprintf(buf, sizeof(buf), "%.*f", static_cast<int>(digits), x);
  return std::strtod(buf, nullptr);
}

Value filter_round(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder a("round", args, {"precision", "method"}, {Value::integer(0), Value::string("common")});
  const std::string method = to_str(a[1]);
  const std::int64_t precision = int_arg(a[0], "precision");
  if (method != "common" && method != "ceil" && method != "floor") {
    throw_type_error("method must be 'common', 'ceil' or 'floor'");
  }
  if (v.is_undefined()) v.fail_undefined();
  if (!v.is_number()) throw_type_error("type " + type_name(v) + " doesn't define __round__ method");
  if (method == "common") {
    if (v.is_int() || v.is_bool()) return Value::integer(v.to_int());  // round(int, n) stays an int
    return Value::number(python_round(v.as_float(), precision));
  }
  const double scale = std::pow(10.0, static_cast<double>(precision));
  const double x = v.to_double() * scale;
  return Value::number((method == "ceil" ? std::ceil(x) : std::floor(x)) / scale);
}

Value filter_abs(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder a("abs", args, {});
  if (v.is_int() || v.is_bool()) {
    const std::int64_t i = v.to_int();
    if (i == INT64_MIN) throw_unsupported("integer overflow");
    return Value::integer(i < 0 ? -i : i);
  }
  if (v.is_float()) return Value::number(std::fabs(v.as_float()));
  if (v.is_undefined()) v.fail_undefined();
  throw_type_error("bad operand type for abs(): '" + type_name(v) + "'");
}

Value filter_indent(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder a("indent", args, {"width", "first", "blank"}, {Value::integer(4), Value::boolean(false), Value::boolean(false)});
  const std::uint64_t width = a[0].is_string() ? 0 : static_cast<std::uint64_t>(std::max<std::int64_t>(0, int_arg(a[0], "width")));
  check_string_bytes(width, "indent(width)");
  const std::string indentation = a[0].is_string() ? a[0].as_string() : std::string(static_cast<std::size_t>(width), ' ');
  std::string s = to_str(v) + "\n";  // jinja2 appends a newline so splitlines() keeps a trailing empty line
  std::vector<std::string> lines = split_lines(s);
  std::string out;
  if (truthy(a[2])) {
    for (std::size_t i = 0; i < lines.size(); ++i) {
      if (i) out += "\n" + indentation;
      out += lines[i];
      check_string_bytes(out.size(), "indent");
    }
  } else {
    out = lines.empty() ? "" : lines[0];
    for (std::size_t i = 1; i < lines.size(); ++i) {
      out += "\n" + (lines[i].empty() ? lines[i] : indentation + lines[i]);
      check_string_bytes(out.size(), "indent");
    }
  }
  if (truthy(a[1])) out = indentation + out;
  return same_flavour(v, std::move(out));
}

Value filter_center(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder a("center", args, {"width"}, {Value::integer(80)});
  CallArgs m;
  m.positional.push_back(a[0]);
  return call_method(soft_str(v), "center", m);
}

Value filter_title(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder a("title", args, {});
  // jinja2: re.split(r"([-\s({\[<]+)") then item[0].upper() + item[1:].lower() for each piece.
  const std::u32string s = unicode::decode(to_str(v));
  std::string out;
  bool at_word_start = true;
  for (char32_t c : s) {
    const bool separator = c == U'-' || c == U'(' || c == U'{' || c == U'[' || c == U'<' || unicode::is_space(c);
    std::string ch;
    utf8::append(ch, c);
    if (separator) {
      out += ch;
      at_word_start = true;
    } else if (at_word_start) {
      out += unicode::upper(ch);
      at_word_start = false;
    } else {
      out += unicode::lower(ch);
    }
  }
  return same_flavour(v, std::move(out));
}

Value filter_truncate(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder a("truncate", args, {"length", "killwords", "end", "leeway"},
              {Value::integer(255), Value::boolean(false), Value::string("..."), Value::none()});
  const std::u32string s = unicode::decode(to_str(v));
  const std::int64_t length = int_arg(a[0], "length");
  const std::u32string end = unicode::decode(to_str(a[2]));
  const std::int64_t leeway = a[3].is_none() ? 5 : int_arg(a[3], "leeway");
  if (length < static_cast<std::int64_t>(end.size())) {
    throw_type_error("expected length >= " + std::to_string(end.size()) + ", got " + std::to_string(length));
  }
  if (static_cast<std::int64_t>(s.size()) <= length + leeway) return Value::string(unicode::encode(s));
  std::u32string head = s.substr(0, static_cast<std::size_t>(length - static_cast<std::int64_t>(end.size())));
  if (!truthy(a[1])) {
    const std::size_t space = head.rfind(U' ');
    if (space != std::u32string::npos) head = head.substr(0, space);
  }
  return Value::string(unicode::encode(head + end));
}

Value filter_wordcount(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder a("wordcount", args, {});
  std::int64_t count = 0;
  bool in_word = false;
  for (char32_t c : unicode::decode(to_str(v))) {
    const bool w = unicode::is_word_char(c);
    if (w && !in_word) ++count;
    in_word = w;
  }
  return Value::integer(count);
}

Value filter_batch(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder a("batch", args, {"linecount", "fill_with"}, {Value::none()});
  const std::int64_t n = int_arg(a[0], "linecount");
  if (n <= 0) throw_type_error("linecount must be positive");
  std::vector<Value> out;
  std::vector<Value> row;
  for (const Value& item : iterate(v)) {
    row.push_back(item);
    if (static_cast<std::int64_t>(row.size()) == n) {
      out.push_back(Value::list(std::move(row)));
      row.clear();
    }
  }
  if (!row.empty()) {
    if (!a[1].is_none()) {
      while (static_cast<std::int64_t>(row.size()) < n) row.push_back(a[1]);
    }
    out.push_back(Value::list(std::move(row)));
  }
  return Value::list(std::move(out));
}

Value filter_map(Interpreter& in, const Value& v, CallArgs& args) {
  std::vector<Value> out;
  // map(attribute='x', default=...) or map('filter_name', *args, **kwargs)
  const Value* attribute = nullptr;
  const Value* dflt = nullptr;
  for (const auto& [k, val] : args.keywords) {
    if (k == "attribute") attribute = &val;
    if (k == "default") dflt = &val;
  }
  if (attribute) {
    for (const Value& item : iterate(v)) {
      Value x = get_path(in, item, *attribute);
      if (x.is_undefined() && dflt) x = *dflt;
      out.push_back(std::move(x));
    }
    return Value::list(std::move(out));
  }
  if (args.positional.empty()) throw_type_error("map requires a filter argument");
  const std::string name = to_str(args.positional[0]);
  if (!is_jinja_filter_name(name)) throw TemplateError(ErrorKind::Runtime, "No filter named '" + name + "'.");
  CallArgs rest;
  rest.positional.assign(args.positional.begin() + 1, args.positional.end());
  rest.keywords = args.keywords;
  for (const Value& item : iterate(v)) {
    CallArgs copy = rest;
    out.push_back(apply_filter(in, name, item, copy));
  }
  return Value::list(std::move(out));
}

// select/reject/selectattr/rejectattr share jinja2's _select_or_reject.
Value select_or_reject(Interpreter& in, const Value& v, CallArgs& args, bool lookup_attr, bool expected) {
  std::size_t pos = 0;
  Value attribute;
  if (lookup_attr) {
    if (args.positional.empty()) throw_type_error("Missing parameter for attribute name");
    attribute = args.positional[pos++];
  }
  std::optional<std::string> test;
  CallArgs test_args;
  if (pos < args.positional.size()) {
    test = to_str(args.positional[pos++]);
    test_args.positional.assign(args.positional.begin() + static_cast<std::ptrdiff_t>(pos), args.positional.end());
    test_args.keywords = args.keywords;
    if (!is_jinja_test_name(*test)) throw TemplateError(ErrorKind::Runtime, "No test named '" + *test + "'.");
  }
  std::vector<Value> out;
  for (const Value& item : iterate(v)) {
    Value subject = lookup_attr ? get_path(in, item, attribute) : item;
    bool ok;
    if (test) {
      CallArgs copy = test_args;
      ok = apply_test(in, *test, subject, copy);
    } else {
      ok = truthy(subject);
    }
    if (ok == expected) out.push_back(item);
  }
  return Value::list(std::move(out));
}

Value filter_string_method(Interpreter&, const Value& v, CallArgs& args, const char* name) {
  ArgBinder a(name, args, {});
  CallArgs none;
  return call_method(soft_str(v), name, none);
}

const std::unordered_map<std::string, FilterFn>& filters() {
  static const std::unordered_map<std::string, FilterFn> table = [] {
    std::unordered_map<std::string, FilterFn> t;
    t["default"] = t["d"] = filter_default;
    t["join"] = filter_join;
    t["trim"] = filter_trim;
    t["tojson"] = filter_tojson;
    t["items"] = filter_items;
    t["length"] = t["count"] = filter_length;
    t["first"] = filter_first;
    t["last"] = filter_last;
    t["replace"] = filter_replace;
    t["reverse"] = filter_reverse;
    t["sort"] = filter_sort;
    t["unique"] = filter_unique;
    t["min"] = [](Interpreter& in, const Value& v, CallArgs& a) { return min_max(in, v, a, false, "min"); };
    t["max"] = [](Interpreter& in, const Value& v, CallArgs& a) { return min_max(in, v, a, true, "max"); };
    t["dictsort"] = filter_dictsort;
    t["sum"] = filter_sum;
    t["int"] = filter_int;
    t["float"] = filter_float;
    t["round"] = filter_round;
    t["abs"] = filter_abs;
    t["indent"] = filter_indent;
    t["center"] = filter_center;
    t["title"] = filter_title;
    t["truncate"] = filter_truncate;
    t["wordcount"] = filter_wordcount;
    t["batch"] = filter_batch;
    t["map"] = filter_map;
    t["select"] = [](Interpreter& in, const Value& v, CallArgs& a) { return select_or_reject(in, v, a, false, true); };
    t["reject"] = [](Interpreter& in, const Value& v, CallArgs& a) { return select_or_reject(in, v, a, false, false); };
    t["selectattr"] = [](Interpreter& in, const Value& v, CallArgs& a) { return select_or_reject(in, v, a, true, true); };
    t["rejectattr"] = [](Interpreter& in, const Value& v, CallArgs& a) { return select_or_reject(in, v, a, true, false); };
    t["upper"] = [](Interpreter& in, const Value& v, CallArgs& a) { return filter_string_method(in, v, a, "upper"); };
    t["lower"] = [](Interpreter& in, const Value& v, CallArgs& a) { return filter_string_method(in, v, a, "lower"); };
    t["capitalize"] = [](Interpreter& in, const Value& v, CallArgs& a) { return filter_string_method(in, v, a, "capitalize"); };
    t["string"] = [](Interpreter&, const Value& v, CallArgs& a) {
      ArgBinder b("string", a, {});
      return soft_str(v);
    };
    t["list"] = [](Interpreter&, const Value& v, CallArgs& a) {
      ArgBinder b("list", a, {});
      return Value::list(iterate(v));
    };
    t["safe"] = [](Interpreter&, const Value& v, CallArgs& a) {
      ArgBinder b("safe", a, {});
      return v.is_markup() ? v : Value::markup(to_str(v));
    };
    t["escape"] = t["e"] = [](Interpreter&, const Value& v, CallArgs& a) {
      ArgBinder b("escape", a, {});
      return v.is_markup() ? v : Value::markup(html_escape(to_str(v)));
    };
    t["forceescape"] = [](Interpreter&, const Value& v, CallArgs& a) {
      ArgBinder b("forceescape", a, {});
      return Value::markup(html_escape(to_str(v)));
    };
    t["attr"] = [](Interpreter& in, const Value& v, CallArgs& a) {
      ArgBinder b("attr", a, {"name"});
      const std::string name = to_str(b[0]);
      // getattr only: unlike obj.name, dict keys are not consulted.
      if (v.is_object()) {
        if (auto x = v.as_object()->attribute(name)) return *x;
      } else if (!v.is_undefined()) {
        if (auto m = lookup_method(v, name)) return *m;
      }
      if (v.is_undefined()) v.fail_undefined();
      return Value::undefined("'" + object_type_repr(v) + "' has no attribute '" + name + "'");
    };
    return t;
  }();
  return table;
}

// Filters jinja2 has that this interpreter does not implement (none is used by the Qwen templates).
const std::unordered_set<std::string>& unimplemented_filters() {
  static const std::unordered_set<std::string> names = {"filesizeformat", "format",    "groupby", "pprint",   "random", "slice",
                                                        "striptags",      "urlencode", "urlize",  "wordwrap", "xmlattr"};
  return names;
}

}  // namespace

bool is_jinja_filter_name(const std::string& name) { return filters().count(name) != 0 || unimplemented_filters().count(name) != 0; }

Value apply_filter(Interpreter& interpreter, const std::string& name, const Value& input, CallArgs& args) {
  auto it = filters().find(name);
  if (it == filters().end()) {
    if (unimplemented_filters().count(name)) throw_unsupported("the '" + name + "' filter is not supported");
    throw TemplateError(ErrorKind::Syntax, "No filter named '" + name + "'.");
  }
  return it->second(interpreter, input, args);
}

}  // namespace qwenrt::text::jinja
