// Python methods callable from templates on str, dict and list values ("x".startswith('a'),
// d.items(), ...), with CPython semantics (code-point indices, Unicode whitespace). Methods that
// mutate are refused like jinja2's ImmutableSandboxedEnvironment does.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "text/jinja/jinja_value.h"

namespace qwenrt::text::jinja {

// The bound method `receiver.name`, or nullopt when Python has no such attribute. Attributes the
// sandbox refuses come back as an undefined value that raises SecurityError when used.
std::optional<Value> lookup_method(const Value& receiver, const std::string& name);

// Calls receiver.name(*args) directly (used by filters built on str methods).
Value call_method(const Value& receiver, const std::string& name, CallArgs& args);

// str.splitlines() without keepends.
std::vector<std::string> split_lines(const std::string& text);

}  // namespace qwenrt::text::jinja
