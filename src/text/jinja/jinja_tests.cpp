// jinja2's builtin tests (`x is defined`, `x is mapping`, ...).
#include "text/jinja/jinja_tests.h"

#include <functional>
#include <unordered_map>

#include "text/jinja/jinja_filters.h"
#include "text/jinja/jinja_objects.h"
#include "text/jinja/jinja_operators.h"
#include "text/jinja/jinja_unicode.h"

namespace qwenrt::text::jinja {
namespace {

using TestFn = std::function<bool(Interpreter&, const Value&, CallArgs&)>;

const Value& one_arg(const char* test, CallArgs& args) {
  if (args.positional.size() != 1 || !args.keywords.empty()) {
    throw_type_error(std::string(test) + "() takes exactly one argument");
  }
  return args.positional[0];
}

void no_args(const char* test, CallArgs& args) {
  if (!args.positional.empty() || !args.keywords.empty()) {
    throw_type_error(std::string(test) + "() takes no arguments");
  }
}

bool is_iterable(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::Undefined:  // jinja2.Undefined defines __iter__
    case Value::Kind::String:
    case Value::Kind::List:
    case Value::Kind::Dict: return true;
    case Value::Kind::Object: return v.as_object()->type_name() == "LoopContext";
    default: return false;
  }
}

// Python `a is b` for the values a template can produce: singletons and small objects compare by value,
// containers by identity.
bool same_as(const Value& a, const Value& b) {
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::None:
    case Value::Kind::Undefined: return a.kind() == b.kind() && (a.is_none() || &a.undefined_info() == &b.undefined_info());
    case Value::Kind::Bool: return a.as_bool() == b.as_bool();
    case Value::Kind::Int: return a.as_int() == b.as_int();
    case Value::Kind::Float: return false;
    case Value::Kind::String: return &a.as_string() == &b.as_string();
    case Value::Kind::List: return &a.items() == &b.items();
    case Value::Kind::Dict: return &a.as_dict() == &b.as_dict();
    case Value::Kind::Object: return a.as_object() == b.as_object();
  }
  return false;
}

const std::unordered_map<std::string, TestFn>& tests() {
  static const std::unordered_map<std::string, TestFn> table = [] {
    std::unordered_map<std::string, TestFn> t;
    auto simple = [&](const char* name, std::function<bool(const Value&)> fn) {
      t[name] = [name, fn](Interpreter&, const Value& v, CallArgs& args) {
        no_args(name, args);
        return fn(v);
      };
    };
    simple("defined", [](const Value& v) { return !v.is_undefined(); });
    simple("undefined", [](const Value& v) { return v.is_undefined(); });
    simple("none", [](const Value& v) { return v.is_none(); });
    simple("boolean", [](const Value& v) { return v.is_bool(); });
    simple("false", [](const Value& v) { return v.is_bool() && !v.as_bool(); });
    simple("true", [](const Value& v) { return v.is_bool() && v.as_bool(); });
    simple("integer", [](const Value& v) { return v.is_int(); });
    simple("float", [](const Value& v) { return v.is_float(); });
    simple("number", [](const Value& v) { return v.is_number(); });
    simple("string", [](const Value& v) { return v.is_string(); });
    simple("mapping", [](const Value& v) { return v.is_dict(); });
    // Python: anything with __len__ and __getitem__ (so strings and dicts too, and jinja2.Undefined).
    simple("sequence", [](const Value& v) { return v.is_string() || v.is_list() || v.is_dict() || v.is_undefined(); });
    simple("iterable", is_iterable);
    simple("callable", [](const Value& v) { return v.is_undefined() || (v.is_object() && v.as_object()->is_callable()); });
    simple("escaped", [](const Value& v) { return v.is_markup(); });
    simple("lower", [](const Value& v) { return unicode::is_lower(to_str(v)); });
    simple("upper", [](const Value& v) { return unicode::is_upper(to_str(v)); });
    auto parity = [](const Value& v) {
      if (v.is_undefined()) v.fail_undefined();
      return apply_binary(BinaryOp::Mod, v, Value::integer(2));
    };
    simple("odd", [parity](const Value& v) { return equals(parity(v), Value::integer(1)); });
    simple("even", [parity](const Value& v) { return equals(parity(v), Value::integer(0)); });
    t["divisibleby"] = [](Interpreter&, const Value& v, CallArgs& args) {
      return equals(apply_binary(BinaryOp::Mod, v, one_arg("divisibleby", args)), Value::integer(0));
    };
    t["sameas"] = [](Interpreter&, const Value& v, CallArgs& args) { return same_as(v, one_arg("sameas", args)); };
    t["in"] = [](Interpreter&, const Value& v, CallArgs& args) { return contains(one_arg("in", args), v); };
    t["filter"] = [](Interpreter&, const Value& v, CallArgs& args) {
      no_args("filter", args);
      return v.is_string() && is_jinja_filter_name(v.as_string());
    };
    t["test"] = [](Interpreter&, const Value& v, CallArgs& args) {
      no_args("test", args);
      return v.is_string() && is_jinja_test_name(v.as_string());
    };
    auto comparison = [&](std::initializer_list<const char*> names, CompareOp op) {
      for (const char* name : names) {
        t[name] = [name, op](Interpreter&, const Value& v, CallArgs& args) { return compare(op, v, one_arg(name, args)); };
      }
    };
    comparison({"eq", "equalto", "=="}, CompareOp::Eq);
    comparison({"ne", "!="}, CompareOp::Ne);
    comparison({"lt", "lessthan", "<"}, CompareOp::Lt);
    comparison({"le", "<="}, CompareOp::Le);
    comparison({"gt", "greaterthan", ">"}, CompareOp::Gt);
    comparison({"ge", ">="}, CompareOp::Ge);
    return t;
  }();
  return table;
}

}  // namespace

bool is_jinja_test_name(const std::string& name) { return tests().count(name) != 0; }

bool apply_test(Interpreter& interpreter, const std::string& name, const Value& input, CallArgs& args) {
  auto it = tests().find(name);
  if (it == tests().end()) throw TemplateError(ErrorKind::Syntax, "No test named '" + name + "'.");
  return it->second(interpreter, input, args);
}

}  // namespace qwenrt::text::jinja
