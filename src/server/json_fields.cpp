#include "server/json_fields.h"

#include <cmath>
#include <sstream>

namespace qwenrt::server {

namespace {
std::string name(const std::string& path, const std::string& key) { return path.empty() ? key : path + "." + key; }

const json* field(const json& obj, const std::string& key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

struct TooDeep {};
}  // namespace

[[noreturn]] void bad_field(const std::string& field, const std::string& message) { throw RequestError(400, field, field + ": " + message); }

json parse_body(std::string_view body) {
  json j;
  try {
    j = json::parse(body, [](int depth, json::parse_event_t, json&) {
      if (depth > kMaxJsonDepth) throw TooDeep{};
      return true;
    });
  } catch (const TooDeep&) {
    throw RequestError(400, "", "the request body nests deeper than " + std::to_string(kMaxJsonDepth) + " levels");
  } catch (const json::exception& e) {
    throw RequestError(400, "", std::string("the request body is not valid JSON: ") + e.what());
  }
  if (!j.is_object()) throw RequestError(400, "", "the request body must be a JSON object");
  return j;
}

std::optional<bool> get_bool(const json& obj, const std::string& key, const std::string& path) {
  const json* v = field(obj, key);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) bad_field(name(path, key), "must be a boolean");
  return v->get<bool>();
}

std::optional<int64_t> get_int(const json& obj, const std::string& key, int64_t lo, int64_t hi, const std::string& path) {
  const json* v = field(obj, key);
  if (!v) return std::nullopt;
  int64_t x = 0;
  if (v->is_number_integer()) {
    if (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) bad_field(name(path, key), "is out of range");
    x = v->get<int64_t>();
  } else if (v->is_number_float() && std::isfinite(v->get<double>()) && std::floor(v->get<double>()) == v->get<double>() &&
             std::fabs(v->get<double>()) < 9e18) {
    x = static_cast<int64_t>(v->get<double>());
  } else {
    bad_field(name(path, key), "must be an integer");
  }
  if (x < lo || x > hi)
    bad_field(name(path, key), "must be between " + std::to_string(lo) + " and " + std::to_string(hi) + ", got " + std::to_string(x));
  return x;
}

std::optional<double> get_number(const json& obj, const std::string& key, double lo, double hi, const std::string& path) {
  const json* v = field(obj, key);
  if (!v) return std::nullopt;
  if (!v->is_number()) bad_field(name(path, key), "must be a number");
  const double x = v->get<double>();
  if (!(x >= lo && x <= hi)) {
    std::ostringstream m;
    m << "must be between " << lo << " and " << hi << ", got " << x;
    bad_field(name(path, key), m.str());
  }
  return x;
}

std::optional<std::string> get_string(const json& obj, const std::string& key, const std::string& path) {
  const json* v = field(obj, key);
  if (!v) return std::nullopt;
  if (!v->is_string()) bad_field(name(path, key), "must be a string");
  return v->get<std::string>();
}

const json* get_array(const json& obj, const std::string& key, const std::string& path) {
  const json* v = field(obj, key);
  if (v && !v->is_array()) bad_field(name(path, key), "must be an array");
  return v;
}

const json* get_object(const json& obj, const std::string& key, const std::string& path) {
  const json* v = field(obj, key);
  if (v && !v->is_object()) bad_field(name(path, key), "must be an object");
  return v;
}

std::vector<std::string> get_string_list(const json& obj, const std::string& key, std::size_t max_items, const std::string& path) {
  const json* v = field(obj, key);
  std::vector<std::string> out;
  if (!v) return out;
  const std::string f = name(path, key);
  if (v->is_string()) {
    out.push_back(v->get<std::string>());
  } else if (v->is_array()) {
    if (v->size() > max_items) bad_field(f, "at most " + std::to_string(max_items) + " entries");
    for (std::size_t i = 0; i < v->size(); ++i) {
      if (!(*v)[i].is_string()) bad_field(f + "[" + std::to_string(i) + "]", "must be a string");
      out.push_back((*v)[i].get<std::string>());
    }
  } else {
    bad_field(f, "must be a string or an array of strings");
  }
  for (const auto& s : out)
    if (s.empty()) bad_field(f, "entries must not be empty");
  return out;
}

}  // namespace qwenrt::server
