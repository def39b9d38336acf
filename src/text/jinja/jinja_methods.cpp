// Python str/dict/list methods callable from templates, with CPython semantics.
#include "text/jinja/jinja_methods.h"

#include <algorithm>
#include <functional>
#include <unordered_map>
#include <unordered_set>

#include "text/jinja/jinja_limits.h"
#include "text/jinja/jinja_objects.h"
#include "text/jinja/jinja_operators.h"
#include "text/jinja/jinja_unicode.h"

namespace qwenrt::text::jinja {
namespace {

using Method = std::function<Value(const Value& self, CallArgs& args)>;

Value str_result(const Value& self, std::string s) { return self.is_markup() ? Value::markup(std::move(s)) : Value::string(std::move(s)); }

const std::string& require_str(const Value& v, const char* what) {
  if (v.is_string()) return v.as_string();
  if (v.is_undefined()) v.fail_undefined();
  throw_type_error(std::string(what) + " must be str, not " + type_name(v));
}

std::int64_t require_int(const Value& v, const char* what) {
  if (v.is_int() || v.is_bool()) return v.to_int();
  if (v.is_undefined()) v.fail_undefined();
  throw_type_error(std::string(what) + " must be an integer, not " + type_name(v));
}

// Python's slice-index normalisation for the optional start/end arguments of find/count/startswith.
std::pair<std::size_t, std::size_t> span(const Value& start, const Value& end, std::size_t n) {
  auto norm = [n](const Value& v, std::int64_t dflt) {
    if (v.is_none()) return dflt;
    std::int64_t x = require_int(v, "slice index");
    if (x < 0) x = std::max<std::int64_t>(0, x + static_cast<std::int64_t>(n));
    return std::min<std::int64_t>(x, static_cast<std::int64_t>(n));
  };
  const std::int64_t lo = norm(start, 0);
  const std::int64_t hi = norm(end, static_cast<std::int64_t>(n));
  return {static_cast<std::size_t>(lo), static_cast<std::size_t>(std::max(lo, hi))};
}

std::u32string strip_set(const Value& chars, bool& whitespace) {
  whitespace = chars.is_none();
  if (whitespace) return {};
  return unicode::decode(require_str(chars, "strip arg"));
}

Value strip_impl(const Value& self, CallArgs& args, bool left, bool right, const char* name) {
  ArgBinder a(name, args, {"chars"}, {Value::none()});
  bool whitespace;
  const std::u32string set = strip_set(a[0], whitespace);
  const std::u32string s = unicode::decode(self.as_string());
  auto strip_it = [&](char32_t c) { return whitespace ? unicode::is_space(c) : set.find(c) != std::u32string::npos; };
  std::size_t b = 0;
  std::size_t e = s.size();
  if (left) {
    while (b < e && strip_it(s[b])) ++b;
  }
  if (right) {
    while (e > b && strip_it(s[e - 1])) --e;
  }
  return str_result(self, unicode::encode(s.substr(b, e - b)));
}

// str.split / str.rsplit
Value split_impl(const Value& self, CallArgs& args, bool from_right) {
  ArgBinder a(from_right ? "rsplit" : "split", args, {"sep", "maxsplit"}, {Value::none(), Value::integer(-1)});
  std::int64_t maxsplit = require_int(a[1], "maxsplit");
  const std::u32string s = unicode::decode(self.as_string());
  std::vector<std::u32string> parts;
  if (a[0].is_none()) {
    // Runs of whitespace separate; leading/trailing whitespace yields no empty strings.
    if (!from_right) {
      std::size_t i = 0;
      while (i < s.size()) {
        while (i < s.size() && unicode::is_space(s[i])) ++i;
        if (i >= s.size()) break;
        if (maxsplit == 0) {
          std::size_t e = s.size();
          while (e > i && unicode::is_space(s[e - 1])) --e;
          parts.push_back(s.substr(i, e - i));
          break;
        }
        std::size_t j = i;
        while (j < s.size() && !unicode::is_space(s[j])) ++j;
        parts.push_back(s.substr(i, j - i));
        if (maxsplit > 0) --maxsplit;
        i = j;
      }
    } else {
      std::size_t i = s.size();
      while (i > 0) {
        while (i > 0 && unicode::is_space(s[i - 1])) --i;
        if (i == 0) break;
        if (maxsplit == 0) {
          std::size_t b = 0;
          while (b < i && unicode::is_space(s[b])) ++b;
          parts.push_back(s.substr(b, i - b));
          break;
        }
        std::size_t j = i;
        while (j > 0 && !unicode::is_space(s[j - 1])) --j;
        parts.push_back(s.substr(j, i - j));
        if (maxsplit > 0) --maxsplit;
        i = j;
      }
      std::reverse(parts.begin(), parts.end());
    }
  } else {
    const std::u32string sep = unicode::decode(require_str(a[0], "separator"));
    if (sep.empty()) throw_type_error("empty separator");
    if (!from_right) {
      std::size_t start = 0;
      while (maxsplit != 0) {
        const std::size_t p = s.find(sep, start);
        if (p == std::u32string::npos) break;
        parts.push_back(s.substr(start, p - start));
        start = p + sep.size();
        if (maxsplit > 0) --maxsplit;
      }
      parts.push_back(s.substr(start));
    } else {
      std::size_t end = s.size();
      while (maxsplit != 0 && end >= sep.size()) {
        const std::size_t p = s.rfind(sep, end - sep.size());
        if (p == std::u32string::npos) break;
        parts.push_back(s.substr(p + sep.size(), end - p - sep.size()));
        end = p;
        if (maxsplit > 0) --maxsplit;
      }
      parts.push_back(s.substr(0, end));
      std::reverse(parts.begin(), parts.end());
    }
  }
  std::vector<Value> out;
  for (const auto& p : parts) out.push_back(str_result(self, unicode::encode(p)));
  return Value::list(std::move(out));
}

// startswith / endswith: prefix may be a tuple of candidates.
Value affix_impl(const Value& self, CallArgs& args, bool at_end) {
  const char* name = at_end ? "endswith" : "startswith";
  ArgBinder a(name, args, {"affix", "start", "end"}, {Value::none(), Value::none()});
  const std::u32string s = unicode::decode(self.as_string());
  const auto [lo, hi] = span(a[1], a[2], s.size());
  std::vector<Value> candidates;
  if (a[0].is_tuple()) {
    candidates = a[0].items();
  } else if (a[0].is_string()) {
    candidates.push_back(a[0]);
  } else {
    if (a[0].is_undefined()) a[0].fail_undefined();
    throw_type_error(std::string(name) + " first arg must be str or a tuple of str, not " + type_name(a[0]));
  }
  const std::u32string window = lo <= s.size() ? s.substr(lo, hi - lo) : std::u32string();
  for (const Value& c : candidates) {
    const std::u32string affix = unicode::decode(require_str(c, name));
    if (a[1].is_int() && static_cast<std::size_t>(std::max<std::int64_t>(0, a[1].as_int())) > s.size()) continue;
    if (affix.size() > window.size()) continue;
    if (at_end ? window.compare(window.size() - affix.size(), affix.size(), affix) == 0 : window.compare(0, affix.size(), affix) == 0) {
      return Value::boolean(true);
    }
  }
  return Value::boolean(false);
}

Value find_impl(const Value& self, CallArgs& args, bool from_right, bool raise, const char* name) {
  ArgBinder a(name, args, {"sub", "start", "end"}, {Value::none(), Value::none()});
  const std::u32string s = unicode::decode(self.as_string());
  const std::u32string sub = unicode::decode(require_str(a[0], "substring"));
  const auto [lo, hi] = span(a[1], a[2], s.size());
  std::int64_t found = -1;
  if (hi >= lo && hi - lo >= sub.size()) {
    const std::u32string window = s.substr(lo, hi - lo);
    const std::size_t p = from_right ? window.rfind(sub) : window.find(sub);
    if (p != std::u32string::npos) found = static_cast<std::int64_t>(lo + p);
  }
  if (found < 0 && raise) throw_type_error("substring not found");
  return Value::integer(found);
}

Value replace_impl(const Value& self, CallArgs& args) {
  ArgBinder a("replace", args, {"old", "new", "count"}, {Value::integer(-1)});
  std::string old_text = require_str(a[0], "replace() argument 1");
  std::string new_text = require_str(a[1], "replace() argument 2");
  if (self.is_markup()) {
    // markupsafe escapes the arguments of Markup.replace.
    if (!a[0].is_markup()) old_text = html_escape(old_text);
    if (!a[1].is_markup()) new_text = html_escape(new_text);
  }
  std::int64_t count = require_int(a[2], "count");
  const std::u32string s = unicode::decode(self.as_string());
  const std::u32string old_s = unicode::decode(old_text);
  const std::u32string new_s = unicode::decode(new_text);
  std::u32string out;
  if (old_s.empty()) {
    // Python inserts `new` before every character and at the end.
    for (std::size_t i = 0; i <= s.size(); ++i) {
      if (count != 0) {
        out += new_s;
        if (count > 0) --count;
      }
      if (i < s.size()) out.push_back(s[i]);
      check_string_bytes(out.size(), "replace");
    }
  } else {
    std::size_t start = 0;
    while (count != 0) {
      const std::size_t p = s.find(old_s, start);
      if (p == std::u32string::npos) break;
      out += s.substr(start, p - start);
      out += new_s;
      check_string_bytes(out.size(), "replace");
      start = p + old_s.size();
      if (count > 0) --count;
    }
    out += s.substr(start);
  }
  return str_result(self, unicode::encode(out));
}

Value pad_impl(const Value& self, CallArgs& args, const char* name) {
  ArgBinder a(name, args, {"width", "fillchar"}, {Value::string(" ")});
  const std::int64_t width = require_int(a[0], "width");
  const std::u32string fill = unicode::decode(require_str(a[1], "fillchar"));
  if (fill.size() != 1) throw_type_error("The fill character must be exactly one character long");
  const std::u32string s = unicode::decode(self.as_string());
  const auto n = static_cast<std::int64_t>(s.size());
  if (width <= n) return self;
  check_string_bytes(static_cast<std::uint64_t>(width), name);
  const std::size_t total = static_cast<std::size_t>(width - n);
  std::size_t left = 0;
  const std::string which = name;
  if (which == "rjust") {
    left = total;
  } else if (which == "center") {
    // CPython: left = pad/2 + (pad & width & 1)
    left = total / 2 + (total & static_cast<std::size_t>(width) & 1);
  }
  const std::size_t right = total - left;
  std::u32string out(left, fill[0]);
  out += s;
  out.append(right, fill[0]);
  return str_result(self, unicode::encode(out));
}

Value partition_impl(const Value& self, CallArgs& args, bool from_right) {
  ArgBinder a(from_right ? "rpartition" : "partition", args, {"sep"});
  const std::string& s = self.as_string();
  const std::string& sep = require_str(a[0], "separator");
  if (sep.empty()) throw_type_error("empty separator");
  const std::size_t p = from_right ? s.rfind(sep) : s.find(sep);
  if (p == std::string::npos) {
    return from_right ? Value::tuple({str_result(self, ""), str_result(self, ""), self})
                      : Value::tuple({self, str_result(self, ""), str_result(self, "")});
  }
  return Value::tuple({str_result(self, s.substr(0, p)), str_result(self, sep), str_result(self, s.substr(p + sep.size()))});
}

bool all_chars(const std::string& s, const std::function<bool(char32_t)>& pred) {
  const std::u32string cps = unicode::decode(s);
  return !cps.empty() && std::all_of(cps.begin(), cps.end(), pred);
}

const std::unordered_map<std::string, Method>& str_methods() {
  static const std::unordered_map<std::string, Method> table = [] {
    std::unordered_map<std::string, Method> t;
    t["strip"] = [](const Value& s, CallArgs& a) { return strip_impl(s, a, true, true, "strip"); };
    t["lstrip"] = [](const Value& s, CallArgs& a) { return strip_impl(s, a, true, false, "lstrip"); };
    t["rstrip"] = [](const Value& s, CallArgs& a) { return strip_impl(s, a, false, true, "rstrip"); };
    t["split"] = [](const Value& s, CallArgs& a) { return split_impl(s, a, false); };
    t["rsplit"] = [](const Value& s, CallArgs& a) { return split_impl(s, a, true); };
    t["splitlines"] = [](const Value& s, CallArgs& a) {
      ArgBinder b("splitlines", a, {"keepends"}, {Value::boolean(false)});
      if (truthy(b[0])) throw_unsupported("str.splitlines(keepends=True)");
      std::vector<Value> out;
      for (auto& line : split_lines(s.as_string())) out.push_back(str_result(s, std::move(line)));
      return Value::list(std::move(out));
    };
    t["startswith"] = [](const Value& s, CallArgs& a) { return affix_impl(s, a, false); };
    t["endswith"] = [](const Value& s, CallArgs& a) { return affix_impl(s, a, true); };
    t["find"] = [](const Value& s, CallArgs& a) { return find_impl(s, a, false, false, "find"); };
    t["rfind"] = [](const Value& s, CallArgs& a) { return find_impl(s, a, true, false, "rfind"); };
    t["index"] = [](const Value& s, CallArgs& a) { return find_impl(s, a, false, true, "index"); };
    t["rindex"] = [](const Value& s, CallArgs& a) { return find_impl(s, a, true, true, "rindex"); };
    t["count"] = [](const Value& s, CallArgs& a) {
      ArgBinder b("count", a, {"sub", "start", "end"}, {Value::none(), Value::none()});
      const std::u32string text = unicode::decode(s.as_string());
      const std::u32string sub = unicode::decode(require_str(b[0], "substring"));
      const auto [lo, hi] = span(b[1], b[2], text.size());
      const std::u32string window = text.substr(lo, hi - lo);
      std::int64_t n = 0;
      if (sub.empty()) return Value::integer(static_cast<std::int64_t>(window.size()) + 1);
      for (std::size_t p = window.find(sub); p != std::u32string::npos; p = window.find(sub, p + sub.size())) ++n;
      return Value::integer(n);
    };
    t["replace"] = replace_impl;
    auto nullary = [&t](const char* name, std::function<std::string(const std::string&)> fn) {
      t[name] = [name, fn](const Value& s, CallArgs& a) {
        ArgBinder b(name, a, {});
        return str_result(s, fn(s.as_string()));
      };
    };
    nullary("upper", [](const std::string& s) { return unicode::upper(s); });
    nullary("lower", [](const std::string& s) { return unicode::lower(s); });
    nullary("casefold", [](const std::string& s) { return unicode::lower(s); });
    nullary("title", [](const std::string& s) { return unicode::title(s); });
    nullary("capitalize", [](const std::string& s) { return unicode::capitalize(s); });
    nullary("swapcase", [](const std::string& s) { return unicode::swapcase(s); });
    auto predicate = [&t](const char* name, std::function<bool(const std::string&)> fn) {
      t[name] = [name, fn](const Value& s, CallArgs& a) {
        ArgBinder b(name, a, {});
        return Value::boolean(fn(s.as_string()));
      };
    };
    predicate("isspace", [](const std::string& s) { return all_chars(s, unicode::is_space); });
    predicate("islower", [](const std::string& s) { return unicode::is_lower(s); });
    predicate("isupper", [](const std::string& s) { return unicode::is_upper(s); });
    // Known gap: digits outside ASCII (e.g. Arabic-Indic) are not recognised by isdigit/isdecimal/isnumeric.
    predicate("isdigit", [](const std::string& s) { return all_chars(s, unicode::is_decimal_digit); });
    predicate("isdecimal", [](const std::string& s) { return all_chars(s, unicode::is_decimal_digit); });
    predicate("isnumeric", [](const std::string& s) { return all_chars(s, unicode::is_decimal_digit); });
    predicate("isalnum", [](const std::string& s) { return all_chars(s, [](char32_t c) { return c != U'_' && unicode::is_word_char(c); }); });
    predicate("isalpha", [](const std::string& s) {
      return all_chars(s, [](char32_t c) { return c != U'_' && !unicode::is_decimal_digit(c) && unicode::is_word_char(c); });
    });
    t["center"] = [](const Value& s, CallArgs& a) { return pad_impl(s, a, "center"); };
    t["ljust"] = [](const Value& s, CallArgs& a) { return pad_impl(s, a, "ljust"); };
    t["rjust"] = [](const Value& s, CallArgs& a) { return pad_impl(s, a, "rjust"); };
    t["zfill"] = [](const Value& s, CallArgs& a) {
      ArgBinder b("zfill", a, {"width"});
      std::u32string text = unicode::decode(s.as_string());
      const std::int64_t width = require_int(b[0], "width");
      if (width <= static_cast<std::int64_t>(text.size())) return s;
      check_string_bytes(static_cast<std::uint64_t>(width), "zfill");
      const std::size_t fill = static_cast<std::size_t>(width) - text.size();
      const std::size_t at = (!text.empty() && (text[0] == U'+' || text[0] == U'-')) ? 1 : 0;
      text.insert(at, fill, U'0');
      return str_result(s, unicode::encode(text));
    };
    t["partition"] = [](const Value& s, CallArgs& a) { return partition_impl(s, a, false); };
    t["rpartition"] = [](const Value& s, CallArgs& a) { return partition_impl(s, a, true); };
    t["removeprefix"] = [](const Value& s, CallArgs& a) {
      ArgBinder b("removeprefix", a, {"prefix"});
      const std::string& p = require_str(b[0], "prefix");
      const std::string& text = s.as_string();
      return text.compare(0, p.size(), p) == 0 ? str_result(s, text.substr(p.size())) : s;
    };
    t["removesuffix"] = [](const Value& s, CallArgs& a) {
      ArgBinder b("removesuffix", a, {"suffix"});
      const std::string& p = require_str(b[0], "suffix");
      const std::string& text = s.as_string();
      if (!p.empty() && text.size() >= p.size() && text.compare(text.size() - p.size(), p.size(), p) == 0) {
        return str_result(s, text.substr(0, text.size() - p.size()));
      }
      return s;
    };
    t["join"] = [](const Value& s, CallArgs& a) {
      ArgBinder b("join", a, {"iterable"});
      std::string out;
      bool first = true;
      for (const Value& item : iterate(b[0])) {
        if (!item.is_string()) throw_type_error("sequence item: expected str instance, " + type_name(item) + " found");
        if (!first) out += s.as_string();
        first = false;
        out += (s.is_markup() && !item.is_markup()) ? html_escape(item.as_string()) : item.as_string();
        check_string_bytes(out.size(), "join");
      }
      return str_result(s, std::move(out));
    };
    return t;
  }();
  return table;
}

// Python str attributes this interpreter does not implement: calling them is a clear error rather than
// a confusing "undefined" one.
const std::unordered_set<std::string>& unimplemented_str_methods() {
  static const std::unordered_set<std::string> names = {"format",    "format_map",   "encode",      "expandtabs", "translate",
                                                        "maketrans", "isidentifier", "isprintable", "istitle",    "isascii"};
  return names;
}

const std::unordered_map<std::string, Method>& dict_methods() {
  static const std::unordered_map<std::string, Method> table = [] {
    std::unordered_map<std::string, Method> t;
    t["get"] = [](const Value& d, CallArgs& a) {
      ArgBinder b("get", a, {"key", "default"}, {Value::none()});
      if (const Value* v = d.as_dict().find(b[0])) return *v;
      return b[1];
    };
    t["items"] = [](const Value& d, CallArgs& a) {
      ArgBinder b("items", a, {});
      std::vector<Value> out;
      for (const auto& [k, v] : d.as_dict().entries()) out.push_back(Value::tuple({k, v}));
      return Value::list(std::move(out));
    };
    t["keys"] = [](const Value& d, CallArgs& a) {
      ArgBinder b("keys", a, {});
      return Value::list(iterate(d));
    };
    t["values"] = [](const Value& d, CallArgs& a) {
      ArgBinder b("values", a, {});
      std::vector<Value> out;
      for (const auto& [k, v] : d.as_dict().entries()) out.push_back(v);
      return Value::list(std::move(out));
    };
    t["copy"] = [](const Value& d, CallArgs& a) {
      ArgBinder b("copy", a, {});
      return d;  // values are immutable, so sharing is indistinguishable from copying
    };
    return t;
  }();
  return table;
}

const std::unordered_map<std::string, Method>& list_methods() {
  static const std::unordered_map<std::string, Method> table = [] {
    std::unordered_map<std::string, Method> t;
    t["count"] = [](const Value& l, CallArgs& a) {
      ArgBinder b("count", a, {"value"});
      return Value::integer(std::count_if(l.items().begin(), l.items().end(), [&](const Value& v) { return equals(v, b[0]); }));
    };
    t["index"] = [](const Value& l, CallArgs& a) {
      ArgBinder b("index", a, {"value"});
      for (std::size_t i = 0; i < l.items().size(); ++i) {
        if (equals(l.items()[i], b[0])) return Value::integer(static_cast<std::int64_t>(i));
      }
      throw_type_error(repr(b[0]) + " is not in list");
    };
    t["copy"] = [](const Value& l, CallArgs& a) {
      ArgBinder b("copy", a, {});
      return l;
    };
    return t;
  }();
  return table;
}

// jinja2.sandbox's _mutable_spec: these exist in Python but the immutable sandbox refuses them.
bool is_mutating(const Value& receiver, const std::string& name) {
  static const std::unordered_set<std::string> dict_mut = {"clear", "pop", "popitem", "setdefault", "update"};
  static const std::unordered_set<std::string> list_mut = {"append", "clear", "pop", "reverse", "insert", "sort", "extend", "remove"};
  if (receiver.is_dict()) return dict_mut.count(name) != 0;
  if (receiver.is_list() && !receiver.is_tuple()) return list_mut.count(name) != 0;
  return false;
}

const Method* find_method(const Value& receiver, const std::string& name) {
  const std::unordered_map<std::string, Method>* table = nullptr;
  if (receiver.is_string()) {
    table = &str_methods();
  } else if (receiver.is_dict()) {
    table = &dict_methods();
  } else if (receiver.is_list()) {
    table = &list_methods();
    if (receiver.is_tuple() && name == "copy") return nullptr;
  }
  if (!table) return nullptr;
  auto it = table->find(name);
  return it == table->end() ? nullptr : &it->second;
}

}  // namespace

std::optional<Value> lookup_method(const Value& receiver, const std::string& name) {
  // The numeric data attributes of Python int/float (x.real, x.imag, ...).
  if (receiver.is_number()) {
    if (name == "real") return receiver.is_float() ? receiver : Value::integer(receiver.to_int());
    if (name == "imag") return receiver.is_float() ? Value::number(0.0) : Value::integer(0);
    if (!receiver.is_float() && name == "numerator") return Value::integer(receiver.to_int());
    if (!receiver.is_float() && name == "denominator") return Value::integer(1);
    return std::nullopt;
  }
  if (is_mutating(receiver, name)) {
    return Value::undefined("access to attribute '" + name + "' of '" + type_name(receiver) + "' object is unsafe.", ErrorKind::Security);
  }
  if (receiver.is_string() && unimplemented_str_methods().count(name)) {
    const std::string method = name;
    return make_function("<built-in method " + name + " of str object>",
                         [method](Interpreter&, CallArgs&) -> Value { throw_unsupported("str." + method + "() is not supported"); });
  }
  const Method* method = find_method(receiver, name);
  if (!method) return std::nullopt;
  const Value self = receiver;
  const Method fn = *method;
  return make_function("<built-in method " + name + " of " + type_name(receiver) + " object>",
                       [self, fn](Interpreter&, CallArgs& args) { return fn(self, args); });
}

Value call_method(const Value& receiver, const std::string& name, CallArgs& args) {
  const Method* method = find_method(receiver, name);
  if (!method) throw_type_error("'" + type_name(receiver) + "' object has no attribute '" + name + "'");
  return (*method)(receiver, args);
}

std::vector<std::string> split_lines(const std::string& text) {
  const std::u32string s = unicode::decode(text);
  std::vector<std::string> lines;
  std::size_t start = 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (!unicode::is_line_break(s[i])) continue;
    lines.push_back(unicode::encode(s.substr(start, i - start)));
    if (s[i] == U'\r' && i + 1 < s.size() && s[i + 1] == U'\n') ++i;
    start = i + 1;
  }
  if (start < s.size()) lines.push_back(unicode::encode(s.substr(start)));
  return lines;
}

}  // namespace qwenrt::text::jinja
