// jinja2's builtin filters (the ones chat templates use), with transformers' `tojson` override.
#pragma once

#include <string>

#include "text/jinja/jinja_value.h"

namespace qwenrt::text::jinja {

// True for every filter name jinja2 knows (the parser rejects other names like jinja2 does at compile
// time). Some of them are not implemented here; using those raises ErrorKind::Unsupported at render.
bool is_jinja_filter_name(const std::string& name);

Value apply_filter(Interpreter& interpreter, const std::string& name, const Value& input, CallArgs& args);

}  // namespace qwenrt::text::jinja
