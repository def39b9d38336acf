// Global functions a chat template can call, as transformers configures its Jinja environment:
// jinja2's defaults (range, dict, namespace) replaced or extended with transformers' raise_exception,
// strftime_now, its namespace (refusing underscore names) and dict.
#pragma once

#include "text/jinja/jinja_interpreter.h"

namespace qwenrt::text::jinja {

void install_globals(Scope& scope);

}  // namespace qwenrt::text::jinja
