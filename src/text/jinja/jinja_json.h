// Python's json.dumps, which transformers installs as the `tojson` filter:
// tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False). Unlike jinja2's own
// tojson it keeps key order, keeps non-ASCII text and does not HTML-escape.
#pragma once

#include <optional>
#include <string>

#include "text/jinja/jinja_value.h"

namespace qwenrt::text::jinja {

struct JsonDumpOptions {
  bool ensure_ascii = false;
  std::optional<std::string> indent;          // nullopt: single line; otherwise the per-level indent string
  std::optional<std::string> item_separator;  // default ", " (or "," when indenting)
  std::optional<std::string> key_separator;   // default ": "
  bool sort_keys = false;
};

// Throws TypeError for values JSON cannot represent (undefined, namespaces, callables), like Python.
std::string python_json_dumps(const Value& value, const JsonDumpOptions& options = {});

}  // namespace qwenrt::text::jinja
