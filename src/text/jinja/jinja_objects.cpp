// Runtime objects: namespace() and native callables with Python-style argument binding.
#include "text/jinja/jinja_objects.h"

#include "text/jinja/jinja_limits.h"

namespace qwenrt::text::jinja {

std::string Namespace::repr() const {
  // A namespace can hold itself (ns.me = ns) or a chain of namespaces of any length: the one place
  // where printing a value can recurse without a bound, so it is guarded here.
  thread_local int depth = 0;
  struct Guard {
    Guard() {
      if (++depth > kMaxValueDepth) {
        depth = 0;
        throw TemplateError(ErrorKind::Runtime, "printing a namespace nests more than " + std::to_string(kMaxValueDepth) +
                                                    " levels deep (it contains itself?) (limit kMaxValueDepth)");
      }
    }
    ~Guard() {
      if (depth > 0) --depth;
    }
  } guard;
  std::string out = "<Namespace {";
  for (std::size_t i = 0; i < attrs_.size(); ++i) {
    if (i) out += ", ";
    out += jinja::repr(Value::string(attrs_[i].first)) + ": " + jinja::repr(attrs_[i].second);
  }
  return out + "}>";
}

std::optional<Value> Namespace::attribute(const std::string& name) const {
  for (const auto& [k, v] : attrs_) {
    if (k == name) return v;
  }
  return std::nullopt;
}

void Namespace::set(const std::string& name, Value value) {
  if (!name.empty() && name[0] == '_') {
    throw TemplateError(ErrorKind::Security, "Chat templates cannot store underscore-prefixed attributes on a namespace, but got '" + name +
                                                 "'. Please rename the attribute.");
  }
  for (auto& [k, v] : attrs_) {
    if (k == name) {
      v = std::move(value);
      return;
    }
  }
  attrs_.emplace_back(name, std::move(value));
}

Value make_function(std::string display, NativeFunction fn) {
  return Value::object(std::make_shared<BuiltinFunction>(std::move(display), std::move(fn)));
}

ArgBinder::ArgBinder(std::string function, const CallArgs& args, std::vector<std::string> names, std::vector<Value> defaults)
    : values_(names.size()), given_(names.size(), false) {
  if (args.positional.size() > names.size()) {
    throw_type_error(function + "() takes at most " + std::to_string(names.size()) + " argument(s) (" + std::to_string(args.positional.size()) +
                     " given)");
  }
  for (std::size_t i = 0; i < args.positional.size(); ++i) {
    values_[i] = args.positional[i];
    given_[i] = true;
  }
  for (const auto& [key, value] : args.keywords) {
    std::size_t i = 0;
    while (i < names.size() && names[i] != key) ++i;
    if (i == names.size()) throw_type_error(function + "() got an unexpected keyword argument '" + key + "'");
    if (given_[i]) throw_type_error(function + "() got multiple values for argument '" + key + "'");
    values_[i] = value;
    given_[i] = true;
  }
  const std::size_t first_default = names.size() - defaults.size();
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (given_[i]) continue;
    if (i < first_default) throw_type_error(function + "() missing required argument: '" + names[i] + "'");
    values_[i] = defaults[i - first_default];
  }
}

}  // namespace qwenrt::text::jinja
