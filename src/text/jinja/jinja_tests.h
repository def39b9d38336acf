// jinja2's builtin tests (`x is defined`, `x is mapping`, ...).
#pragma once

#include <string>

#include "text/jinja/jinja_value.h"

namespace qwenrt::text::jinja {

bool is_jinja_test_name(const std::string& name);
bool apply_test(Interpreter& interpreter, const std::string& name, const Value& input, CallArgs& args);

}  // namespace qwenrt::text::jinja
