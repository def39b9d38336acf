// Python's json.dumps for the `tojson` filter (key order kept, non-ASCII kept, no HTML escaping).
#include "text/jinja/jinja_json.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "text/jinja/jinja_limits.h"
#include "text/jinja/jinja_operators.h"
#include "text/jinja/jinja_pyformat.h"
#include "text/jinja/jinja_unicode.h"
#include "text/unicode/unicode_utf8.h"

namespace qwenrt::text::jinja {
namespace {

// json.encoder's py_encode_basestring(_ascii).
void append_json_string(std::string& out, const std::string& s, bool ensure_ascii) {
  out.push_back('"');
  char buf[16];
  for (char32_t c : unicode::decode(s)) {
    switch (c) {
      case U'"': out += "\\\""; continue;
      case U'\\': out += "\\\\"; continue;
      case U'\n': out += "\\n"; continue;
      case U'\r': out += "\\r"; continue;
      case U'\t': out += "\\t"; continue;
      case U'\b': out += "\\b"; continue;
      case U'\f': out += "\\f"; continue;
      default: break;
    }
    if (c < 0x20) {
      std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(c));
      out += buf;
    } else if (ensure_ascii && c > 0x7E) {
      if (c >= 0x10000) {
        const char32_t v = c - 0x10000;
        std::snprintf(buf, sizeof(buf), "\\u%04x\\u%04x", static_cast<unsigned>(0xD800 | (v >> 10)), static_cast<unsigned>(0xDC00 | (v & 0x3FF)));
      } else {
        std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(c));
      }
      out += buf;
    } else {
      utf8::append(out, c);
    }
  }
  out.push_back('"');
}

std::string float_json(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d > 0 ? "Infinity" : "-Infinity";
  return python_float_repr(d);
}

class Encoder {
 public:
  explicit Encoder(const JsonDumpOptions& o) : options_(o) {
    item_sep_ = o.item_separator.value_or(o.indent ? "," : ", ");
    key_sep_ = o.key_separator.value_or(": ");
  }

  void encode(const Value& v, int level, std::string& out) {
    switch (v.kind()) {
      case Value::Kind::None: out += "null"; return;
      case Value::Kind::Bool: out += v.as_bool() ? "true" : "false"; return;
      case Value::Kind::Int: out += std::to_string(v.as_int()); return;
      case Value::Kind::Float: out += float_json(v.as_float()); return;
      case Value::Kind::String: append_json_string(out, v.as_string(), options_.ensure_ascii); return;
      case Value::Kind::List: encode_list(v.items(), level, out); return;
      case Value::Kind::Dict: encode_dict(v.as_dict(), level, out); return;
      default: throw_type_error("Object of type " + type_name(v) + " is not JSON serializable");
    }
  }

 private:
  void newline(int level, std::string& out) {
    out.push_back('\n');
    for (int i = 0; i < level; ++i) {
      out += *options_.indent;
      check_string_bytes(out.size(), "tojson");
    }
  }

  void encode_list(const std::vector<Value>& items, int level, std::string& out) {
    if (items.empty()) {
      out += "[]";
      return;
    }
    out.push_back('[');
    for (std::size_t i = 0; i < items.size(); ++i) {
      if (i) out += item_sep_;
      if (options_.indent) newline(level + 1, out);
      encode(items[i], level + 1, out);
    }
    if (options_.indent) newline(level, out);
    out.push_back(']');
  }

  // Python converts non-string keys: True -> "true", None -> "null", 1.5 -> "1.5".
  std::string key_text(const Value& k) {
    switch (k.kind()) {
      case Value::Kind::String: return k.as_string();
      case Value::Kind::Bool: return k.as_bool() ? "true" : "false";
      case Value::Kind::None: return "null";
      case Value::Kind::Int: return std::to_string(k.as_int());
      case Value::Kind::Float: return float_json(k.as_float());
      default: throw_type_error("keys must be str, int, float, bool or None, not " + type_name(k));
    }
  }

  void encode_dict(const Dict& dict, int level, std::string& out) {
    if (dict.size() == 0) {
      out += "{}";
      return;
    }
    std::vector<const std::pair<Value, Value>*> entries;
    for (const auto& e : dict.entries()) entries.push_back(&e);
    if (options_.sort_keys) {
      std::stable_sort(entries.begin(), entries.end(), [](const auto* a, const auto* b) { return order(a->first, b->first) < 0; });
    }
    out.push_back('{');
    bool first = true;
    for (const auto* e : entries) {
      if (!first) out += item_sep_;
      first = false;
      if (options_.indent) newline(level + 1, out);
      append_json_string(out, key_text(e->first), options_.ensure_ascii);
      out += key_sep_;
      encode(e->second, level + 1, out);
    }
    if (options_.indent) newline(level, out);
    out.push_back('}');
  }

  const JsonDumpOptions& options_;
  std::string item_sep_;
  std::string key_sep_;
};

}  // namespace

std::string python_json_dumps(const Value& value, const JsonDumpOptions& options) {
  std::string out;
  Encoder(options).encode(value, 0, out);
  return out;
}

}  // namespace qwenrt::text::jinja
