// Runtime objects shared by the interpreter, filters and globals: namespace() objects and native
// callables (global functions and bound methods such as "abc".startswith).
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "text/jinja/jinja_value.h"

namespace qwenrt::text::jinja {

// jinja2's Namespace as transformers subclasses it: attribute bag, mutable via {% set ns.x = ... %},
// underscore-prefixed names refused.
class Namespace : public Object {
 public:
  std::string type_name() const override { return "Namespace"; }
  std::string repr() const override;
  std::optional<Value> attribute(const std::string& name) const override;
  void set(const std::string& name, Value value);
  void release_references() override { attrs_.clear(); }

 private:
  std::vector<std::pair<std::string, Value>> attrs_;  // insertion order, for repr
};

using NativeFunction = std::function<Value(Interpreter&, CallArgs&)>;

class BuiltinFunction : public Object {
 public:
  // `display` is what repr shows, e.g. "<built-in method startswith of str object>".
  BuiltinFunction(std::string display, NativeFunction fn) : display_(std::move(display)), fn_(std::move(fn)) {}
  std::string type_name() const override { return "builtin_function_or_method"; }
  std::string repr() const override { return display_; }
  bool is_callable() const override { return true; }
  Value call(Interpreter& interpreter, CallArgs& args) override { return fn_(interpreter, args); }

 private:
  std::string display_;
  NativeFunction fn_;
};

Value make_function(std::string display, NativeFunction fn);

// Binds call arguments to a Python-style signature: names in order, defaults for the trailing ones.
// Raises TypeError for unknown keywords, duplicates, too many positionals and missing arguments.
// `function` names the callee in messages.
class ArgBinder {
 public:
  ArgBinder(std::string function, const CallArgs& args, std::vector<std::string> names, std::vector<Value> defaults = {});
  const Value& operator[](std::size_t i) const { return values_[i]; }
  bool given(std::size_t i) const { return given_[i]; }

 private:
  std::vector<Value> values_;
  std::vector<bool> given_;
};

}  // namespace qwenrt::text::jinja
