// The value type the Jinja interpreter computes with. It models the Python objects a chat template
// can see under transformers (JSON data plus a few runtime objects), with Python semantics: ints and
// floats are distinct, lists and tuples are distinct, dicts keep insertion order, and an "undefined"
// value behaves like jinja2.Undefined (printable and falsy, any other use is an error).
//
// Lists and dicts are immutable once built (transformers renders in jinja2's
// ImmutableSandboxedEnvironment, which forbids mutating them), so values share them by pointer.
// Namespaces are the only mutable objects, exactly as in Jinja.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "text/jinja/jinja_error.h"

namespace qwenrt::text::jinja {

class Interpreter;
class Value;

// Arguments of a call, as written at the call site: f(a, b, key=c).
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keywords;
};

// Runtime objects that are not plain data: callables (macros, builtins, bound methods), namespaces and
// the loop object.
class Object : public std::enable_shared_from_this<Object> {
 public:
  virtual ~Object() = default;
  // Python type name, used in error messages ("Namespace", "Macro", "builtin_function_or_method").
  virtual std::string type_name() const = 0;
  virtual std::string repr() const = 0;
  // Attribute lookup (obj.name). nullopt means "no such attribute".
  virtual std::optional<Value> attribute(const std::string& name) const;
  virtual bool is_callable() const { return false; }
  virtual Value call(Interpreter& interpreter, CallArgs& args);
  // Drops references to other values. Called when a render ends, because macros (which reference the
  // scope they are defined in), loop objects and namespaces can form reference cycles.
  virtual void release_references() {}
};

struct UndefinedInfo {
  std::string message;  // what the error says when the undefined value is used
  ErrorKind kind = ErrorKind::Undefined;
};

class Dict;

class Value {
 public:
  enum class Kind : std::uint8_t { Undefined, None, Bool, Int, Float, String, List, Dict, Object };

  Value();  // undefined, with a generic message
  static Value undefined(std::string message, ErrorKind kind = ErrorKind::Undefined);
  static Value none();
  static Value boolean(bool b);
  static Value integer(std::int64_t i);
  static Value number(double d);
  static Value string(std::string s);
  // A jinja2 Markup string (result of |safe or |escape); "+" with a plain string escapes the other side.
  static Value markup(std::string s);
  static Value list(std::vector<Value> items);
  static Value tuple(std::vector<Value> items);
  static Value dict(std::shared_ptr<const Dict> dict);
  static Value object(std::shared_ptr<Object> object);

  Kind kind() const { return kind_; }
  // Nesting of lists, tuples and dicts: 0 for anything else, 1 + the deepest element for them. Never
  // more than kMaxValueDepth (jinja_limits.h): building a deeper value throws.
  int depth() const { return depth_; }
  bool is_undefined() const { return kind_ == Kind::Undefined; }
  bool is_none() const { return kind_ == Kind::None; }
  bool is_bool() const { return kind_ == Kind::Bool; }
  bool is_int() const { return kind_ == Kind::Int; }
  bool is_float() const { return kind_ == Kind::Float; }
  // Python's numbers.Number: bool is an int subclass.
  bool is_number() const { return kind_ == Kind::Bool || kind_ == Kind::Int || kind_ == Kind::Float; }
  bool is_string() const { return kind_ == Kind::String; }
  bool is_markup() const { return kind_ == Kind::String && markup_; }
  bool is_list() const { return kind_ == Kind::List; }  // list or tuple
  bool is_tuple() const { return kind_ == Kind::List && tuple_; }
  bool is_dict() const { return kind_ == Kind::Dict; }
  bool is_object() const { return kind_ == Kind::Object; }

  bool as_bool() const { return std::get<bool>(data_); }
  std::int64_t as_int() const { return std::get<std::int64_t>(data_); }
  double as_float() const { return std::get<double>(data_); }
  // Bool/Int/Float as a double (Python numeric promotion).
  double to_double() const;
  // Bool/Int as an integer (True == 1).
  std::int64_t to_int() const;
  const std::string& as_string() const { return *std::get<std::shared_ptr<const std::string>>(data_); }
  const std::vector<Value>& items() const { return *std::get<std::shared_ptr<const std::vector<Value>>>(data_); }
  const Dict& as_dict() const { return *std::get<std::shared_ptr<const Dict>>(data_); }
  const std::shared_ptr<Object>& as_object() const { return std::get<std::shared_ptr<Object>>(data_); }
  const UndefinedInfo& undefined_info() const { return *std::get<std::shared_ptr<const UndefinedInfo>>(data_); }

  // Raises the error an undefined value raises when used (jinja2's _fail_with_undefined_error).
  [[noreturn]] void fail_undefined() const;

 private:
  using Data = std::variant<std::shared_ptr<const UndefinedInfo>, std::monostate, bool, std::int64_t, double, std::shared_ptr<const std::string>,
                            std::shared_ptr<const std::vector<Value>>, std::shared_ptr<const Dict>, std::shared_ptr<Object>>;
  Value(Kind kind, Data data) : kind_(kind), data_(std::move(data)) {}

  Kind kind_;
  bool markup_ = false;
  bool tuple_ = false;
  std::uint16_t depth_ = 0;
  Data data_;
};

// An insertion-ordered mapping with Python key equality (1 == 1.0 == True).
class Dict {
 public:
  const Value* find(const Value& key) const;
  const Value* find(std::string_view key) const;
  // Replaces the value of an existing key in place (keeping its position) or appends.
  void set(Value key, Value value);
  const std::vector<std::pair<Value, Value>>& entries() const { return entries_; }
  std::size_t size() const { return entries_.size(); }

 private:
  std::vector<std::pair<Value, Value>> entries_;
};

// --- Python semantics -------------------------------------------------------------------------

bool truthy(const Value& v);                  // bool(v)
std::string to_str(const Value& v);           // str(v); undefined prints as ""
std::string repr(const Value& v);             // repr(v)
bool equals(const Value& a, const Value& b);  // a == b
std::string type_name(const Value& v);        // type(v).__name__
// jinja2's object_type_repr: "None", "dict object", ... (used in undefined messages).
std::string object_type_repr(const Value& v);
// Materialises iter(v): list/tuple items, dict keys, string characters; undefined is empty.
std::vector<Value> iterate(const Value& v);
// len(v), or nullopt when the value has no length. Undefined has length 0.
std::optional<std::size_t> length_of(const Value& v);

}  // namespace qwenrt::text::jinja
