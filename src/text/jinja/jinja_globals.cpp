// The global functions templates can call (range, dict, namespace, raise_exception, strftime_now).
#include "text/jinja/jinja_globals.h"

#include <ctime>

#include "text/jinja/jinja_objects.h"

namespace qwenrt::text::jinja {
namespace {

constexpr std::int64_t kMaxRange = 100000;  // jinja2.sandbox.MAX_RANGE

std::int64_t int_argument(const Value& v) {
  if (v.is_int() || v.is_bool()) return v.to_int();
  if (v.is_undefined()) v.fail_undefined();
  throw_type_error("'" + type_name(v) + "' object cannot be interpreted as an integer");
}

Value range_fn(Interpreter&, CallArgs& args) {
  if (!args.keywords.empty()) throw_type_error("range() takes no keyword arguments");
  const auto& p = args.positional;
  if (p.empty() || p.size() > 3) throw_type_error("range expected 1 to 3 arguments, got " + std::to_string(p.size()));
  std::int64_t start = 0;
  std::int64_t stop;
  std::int64_t step = 1;
  if (p.size() == 1) {
    stop = int_argument(p[0]);
  } else {
    start = int_argument(p[0]);
    stop = int_argument(p[1]);
    if (p.size() == 3) step = int_argument(p[2]);
  }
  if (step == 0) throw_type_error("range() arg 3 must not be zero");
  std::vector<Value> out;
  for (std::int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
    if (static_cast<std::int64_t>(out.size()) >= kMaxRange) {
      // Python raises OverflowError here; it is reported as a TypeError-like argument error.
      throw TemplateError(ErrorKind::Type, "Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
    }
    out.push_back(Value::integer(i));
  }
  return Value::list(std::move(out));
}

// dict(mapping_or_pairs?, **kwargs)
Value dict_fn(Interpreter&, CallArgs& args) {
  auto dict = std::make_shared<Dict>();
  if (args.positional.size() > 1) throw_type_error("dict expected at most 1 argument, got " + std::to_string(args.positional.size()));
  if (!args.positional.empty()) {
    const Value& src = args.positional[0];
    if (src.is_dict()) {
      for (const auto& [k, v] : src.as_dict().entries()) dict->set(k, v);
    } else {
      for (const Value& pair : iterate(src)) {
        std::vector<Value> kv = iterate(pair);
        if (kv.size() != 2) throw_type_error("dictionary update sequence element has length " + std::to_string(kv.size()) + "; 2 is required");
        dict->set(kv[0], kv[1]);
      }
    }
  }
  for (const auto& [k, v] : args.keywords) dict->set(Value::string(k), v);
  return Value::dict(dict);
}

Value namespace_fn(Interpreter& in, CallArgs& args) {
  Value init = dict_fn(in, args);
  auto ns = std::make_shared<Namespace>();
  in.adopt(ns);
  for (const auto& [k, v] : init.as_dict().entries()) {
    if (!k.is_string()) throw_type_error("namespace attribute names must be strings");
    ns->set(k.as_string(), v);
  }
  return Value::object(ns);
}

Value raise_exception_fn(Interpreter&, CallArgs& args) {
  std::string message;
  if (!args.positional.empty()) message = to_str(args.positional[0]);
  throw TemplateError(ErrorKind::Raised, message);
}

Value strftime_now_fn(Interpreter&, CallArgs& args) {
  if (args.positional.size() != 1 || !args.keywords.empty() || !args.positional[0].is_string()) {
    throw_type_error("strftime_now() takes one format string");
  }
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char buf[512];
  const std::size_t n = std::strftime(buf, sizeof(buf), args.positional[0].as_string().c_str(), &local);
  return Value::string(std::string(buf, n));
}

Value unsupported_fn(const std::string& name) {
  return make_function("<function " + name + ">",
                       [name](Interpreter&, CallArgs&) -> Value { throw_unsupported("the '" + name + "' global is not supported"); });
}

}  // namespace

void install_globals(Scope& scope) {
  scope.set("range", make_function("<class 'range'>", range_fn));
  scope.set("dict", make_function("<class 'dict'>", dict_fn));
  scope.set("namespace", make_function("<class 'Namespace'>", namespace_fn));
  scope.set("raise_exception", make_function("<function raise_exception>", raise_exception_fn));
  scope.set("strftime_now", make_function("<function strftime_now>", strftime_now_fn));
  for (const char* name : {"lipsum", "cycler", "joiner"}) scope.set(name, unsupported_fn(name));
}

}  // namespace qwenrt::text::jinja
