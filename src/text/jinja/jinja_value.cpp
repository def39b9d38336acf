// The Jinja value type: Python-like objects, truthiness, printing and Undefined behaviour.
#include "text/jinja/jinja_value.h"

#include <algorithm>
#include <cmath>

#include "text/jinja/jinja_limits.h"
#include "text/jinja/jinja_pyformat.h"
#include "text/jinja/jinja_unicode.h"
#include "text/unicode/unicode_utf8.h"

namespace qwenrt::text::jinja {

std::optional<Value> Object::attribute(const std::string&) const { return std::nullopt; }

Value Object::call(Interpreter&, CallArgs&) { throw_type_error("'" + type_name() + "' object is not callable"); }

Value::Value() : Value(Kind::Undefined, std::make_shared<const UndefinedInfo>(UndefinedInfo{"value is undefined"})) {}

Value Value::undefined(std::string message, ErrorKind kind) {
  return Value(Kind::Undefined, std::make_shared<const UndefinedInfo>(UndefinedInfo{std::move(message), kind}));
}
Value Value::none() { return Value(Kind::None, std::monostate{}); }
Value Value::boolean(bool b) { return Value(Kind::Bool, b); }
Value Value::integer(std::int64_t i) { return Value(Kind::Int, i); }
Value Value::number(double d) { return Value(Kind::Float, d); }
namespace {

std::uint16_t nested_depth(int deepest_element) {
  if (deepest_element + 1 > kMaxValueDepth) {
    throw TemplateError(ErrorKind::Runtime,
                        "a value nests lists and dicts more than " + std::to_string(kMaxValueDepth) + " levels deep (limit kMaxValueDepth)");
  }
  return static_cast<std::uint16_t>(deepest_element + 1);
}

}  // namespace

Value Value::string(std::string s) {
  check_string_bytes(s.size(), "building a string");
  return Value(Kind::String, std::make_shared<const std::string>(std::move(s)));
}
Value Value::markup(std::string s) {
  Value v = string(std::move(s));
  v.markup_ = true;
  return v;
}
Value Value::list(std::vector<Value> items) {
  check_list_items(items.size(), "building a list");
  int deepest = 0;
  for (const Value& item : items) deepest = std::max(deepest, static_cast<int>(item.depth_));
  Value v(Kind::List, std::make_shared<const std::vector<Value>>(std::move(items)));
  v.depth_ = nested_depth(deepest);
  return v;
}
Value Value::tuple(std::vector<Value> items) {
  Value v = list(std::move(items));
  v.tuple_ = true;
  return v;
}
Value Value::dict(std::shared_ptr<const Dict> dict) {
  check_list_items(dict->size(), "building a dict");
  int deepest = 0;
  for (const auto& [k, v] : dict->entries()) deepest = std::max({deepest, static_cast<int>(k.depth_), static_cast<int>(v.depth_)});
  Value v(Kind::Dict, std::move(dict));
  v.depth_ = nested_depth(deepest);
  return v;
}
Value Value::object(std::shared_ptr<Object> object) { return Value(Kind::Object, std::move(object)); }

double Value::to_double() const {
  switch (kind_) {
    case Kind::Bool: return as_bool() ? 1.0 : 0.0;
    case Kind::Int: return static_cast<double>(as_int());
    case Kind::Float: return as_float();
    default: throw_type_error("expected a number, got '" + type_name(*this) + "'");
  }
}

std::int64_t Value::to_int() const {
  switch (kind_) {
    case Kind::Bool: return as_bool() ? 1 : 0;
    case Kind::Int: return as_int();
    default: throw_type_error("'" + type_name(*this) + "' object cannot be interpreted as an integer");
  }
}

void Value::fail_undefined() const {
  const UndefinedInfo& info = undefined_info();
  throw TemplateError(info.kind, info.message);
}

const Value* Dict::find(const Value& key) const {
  if (key.is_string()) return find(std::string_view(key.as_string()));
  for (const auto& [k, v] : entries_) {
    if (equals(k, key)) return &v;
  }
  return nullptr;
}

const Value* Dict::find(std::string_view key) const {
  for (const auto& [k, v] : entries_) {
    if (k.is_string() && k.as_string() == key) return &v;
  }
  return nullptr;
}

void Dict::set(Value key, Value value) {
  for (auto& entry : entries_) {
    if (equals(entry.first, key)) {
      entry.second = std::move(value);
      return;
    }
  }
  entries_.emplace_back(std::move(key), std::move(value));
}

bool truthy(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::Undefined:
    case Value::Kind::None: return false;
    case Value::Kind::Bool: return v.as_bool();
    case Value::Kind::Int: return v.as_int() != 0;
    case Value::Kind::Float: return v.as_float() != 0.0;
    case Value::Kind::String: return !v.as_string().empty();
    case Value::Kind::List: return !v.items().empty();
    case Value::Kind::Dict: return v.as_dict().size() != 0;
    case Value::Kind::Object: return true;
  }
  return false;
}

namespace {

std::string sequence_repr(const Value& v) {
  const bool tuple = v.is_tuple();
  std::string out = tuple ? "(" : "[";
  const auto& items = v.items();
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i) out += ", ";
    out += repr(items[i]);
  }
  if (tuple && items.size() == 1) out += ",";
  out += tuple ? ")" : "]";
  return out;
}

std::string dict_repr(const Dict& d) {
  std::string out = "{";
  bool first = true;
  for (const auto& [k, val] : d.entries()) {
    if (!first) out += ", ";
    first = false;
    out += repr(k);
    out += ": ";
    out += repr(val);
  }
  out += "}";
  return out;
}

}  // namespace

std::string to_str(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::Undefined: return "";
    case Value::Kind::String: return v.as_string();
    default: return repr(v);
  }
}

std::string repr(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::Undefined: return "Undefined";
    case Value::Kind::None: return "None";
    case Value::Kind::Bool: return v.as_bool() ? "True" : "False";
    case Value::Kind::Int: return std::to_string(v.as_int());
    case Value::Kind::Float: return python_float_repr(v.as_float());
    case Value::Kind::String: return v.is_markup() ? "Markup(" + python_string_repr(v.as_string()) + ")" : python_string_repr(v.as_string());
    case Value::Kind::List: return sequence_repr(v);
    case Value::Kind::Dict: return dict_repr(v.as_dict());
    case Value::Kind::Object: return v.as_object()->repr();
  }
  return "";
}

bool equals(const Value& a, const Value& b) {
  using K = Value::Kind;
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.to_double() == b.to_double();
    return a.to_int() == b.to_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case K::Undefined:
    case K::None: return true;
    case K::String: return a.as_string() == b.as_string();
    case K::List: {
      // Python never considers a list equal to a tuple.
      if (a.is_tuple() != b.is_tuple()) return false;
      const auto& x = a.items();
      const auto& y = b.items();
      if (x.size() != y.size()) return false;
      for (std::size_t i = 0; i < x.size(); ++i) {
        if (!equals(x[i], y[i])) return false;
      }
      return true;
    }
    case K::Dict: {
      const Dict& x = a.as_dict();
      const Dict& y = b.as_dict();
      if (x.size() != y.size()) return false;
      for (const auto& [k, val] : x.entries()) {
        const Value* other = y.find(k);
        if (!other || !equals(val, *other)) return false;
      }
      return true;
    }
    case K::Object: return a.as_object() == b.as_object();
    default: return false;
  }
}

std::string type_name(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::Undefined: return "Undefined";
    case Value::Kind::None: return "NoneType";
    case Value::Kind::Bool: return "bool";
    case Value::Kind::Int: return "int";
    case Value::Kind::Float: return "float";
    case Value::Kind::String: return v.is_markup() ? "Markup" : "str";
    case Value::Kind::List: return v.is_tuple() ? "tuple" : "list";
    case Value::Kind::Dict: return "dict";
    case Value::Kind::Object: return v.as_object()->type_name();
  }
  return "object";
}

std::string object_type_repr(const Value& v) {
  if (v.is_none()) return "None";
  if (v.is_markup()) return "markupsafe.Markup object";
  if (v.is_object()) return "jinja2 " + type_name(v) + " object";
  return type_name(v) + " object";
}

std::vector<Value> iterate(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::Undefined: return {};
    case Value::Kind::List: return v.items();
    case Value::Kind::Dict: {
      std::vector<Value> keys;
      keys.reserve(v.as_dict().size());
      for (const auto& entry : v.as_dict().entries()) keys.push_back(entry.first);
      return keys;
    }
    case Value::Kind::String: {
      const std::u32string code_points = unicode::decode(v.as_string());
      check_list_items(code_points.size(), "iterating over a string");
      std::vector<Value> chars;
      chars.reserve(code_points.size());
      for (char32_t c : code_points) {
        std::string s;
        utf8::append(s, c);
        chars.push_back(v.is_markup() ? Value::markup(std::move(s)) : Value::string(std::move(s)));
      }
      return chars;
    }
    default: throw_type_error("'" + type_name(v) + "' object is not iterable");
  }
}

std::optional<std::size_t> length_of(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::Undefined: return 0;
    case Value::Kind::String: return unicode::code_point_count(v.as_string());
    case Value::Kind::List: return v.items().size();
    case Value::Kind::Dict: return v.as_dict().size();
    default: return std::nullopt;
  }
}

}  // namespace qwenrt::text::jinja
