#include "cli/options.h"

#include <cerrno>
#include <cstdlib>

#include "core/error.h"
#include "core/mapped_file.h"
#include "text/unicode/unicode_utf8.h"

namespace qwenrt::cli {

Options::Options(std::string command, std::set<std::string> valued, std::set<std::string> flags, std::map<std::string, std::string> short_names)
    : command_(std::move(command)), valued_(std::move(valued)), flags_(std::move(flags)), short_names_(std::move(short_names)) {
  valued_.insert("threads");
  valued_.insert("device");
  flags_.insert("int8-activations");  // kInt8ActivationsFlag (cli/commands.h)
}

void Options::parse(const std::vector<std::string>& args) {
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string a = args[i];
    if (auto it = short_names_.find(a); it != short_names_.end()) a = "--" + it->second;
    if (a.rfind("--", 0) != 0) fail(command_, ": unexpected argument '", a, "'");
    std::string name = a.substr(2), value;
    bool inline_value = false;
    if (auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      inline_value = true;
    }
    if (flags_.count(name)) {
      if (inline_value) fail(command_, ": --", name, " takes no value");
      flags_set_.insert(name);
    } else if (valued_.count(name)) {
      if (!inline_value) {
        if (i + 1 >= args.size()) fail(command_, ": --", name, " needs a value");
        value = args[++i];
      }
      if (values_.count(name)) fail(command_, ": --", name, " given twice");
      values_[name] = value;
    } else {
      fail(command_, ": unknown option '", a, "'");
    }
  }
}

bool Options::has(const std::string& name) const { return values_.count(name) != 0; }

std::string Options::str(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end()) fail(command_, ": --", name, " is required");
  return it->second;
}

std::string Options::str_or(const std::string& name, const std::string& fallback) const {
  auto it = values_.find(name);
  return it == values_.end() ? fallback : it->second;
}

int64_t Options::integer_or(const std::string& name, int64_t fallback, int64_t lo, int64_t hi) const {
  auto it = values_.find(name);
  if (it == values_.end()) return fallback;
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(it->second.c_str(), &end, 10);
  if (it->second.empty() || *end != '\0' || errno == ERANGE) fail(command_, ": --", name, " must be an integer, got '", it->second, "'");
  if (v < lo || v > hi) fail(command_, ": --", name, " must be in [", lo, ", ", hi, "], got ", v);
  return v;
}

double Options::number_or(const std::string& name, double fallback, double lo, double hi) const {
  auto it = values_.find(name);
  if (it == values_.end()) return fallback;
  char* end = nullptr;
  double v = std::strtod(it->second.c_str(), &end);
  if (it->second.empty() || *end != '\0') fail(command_, ": --", name, " must be a number, got '", it->second, "'");
  if (!(v >= lo && v <= hi)) fail(command_, ": --", name, " must be in [", lo, ", ", hi, "], got ", v);
  return v;
}

std::vector<int32_t> parse_id_list(const std::string& text, const std::string& what) {
  std::vector<int32_t> ids;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    std::size_t comma = text.find(',', pos);
    std::string part = text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    while (!part.empty() && (part.back() == ' ' || part.back() == '\r')) part.pop_back();
    while (!part.empty() && part.front() == ' ') part.erase(part.begin());
    char* end = nullptr;
    errno = 0;
    long long v = std::strtoll(part.c_str(), &end, 10);
    if (part.empty() || *end != '\0' || errno == ERANGE || v < 0 || v > INT32_MAX)
      fail(what, ": '", part, "' is not a token id (expected comma-separated non-negative integers)");
    ids.push_back(static_cast<int32_t>(v));
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return ids;
}

std::string read_input_file(const std::string& path, const std::string& what) {
  try {
    return read_regular_file(path, kMaxInputFileBytes);
  } catch (const Error& e) {
    fail(what, ": ", e.what());
  }
}

void require_utf8(const std::string& text, const std::string& where) {
  if (const auto bad = text::utf8::find_invalid(text)) fail(where, " is not valid UTF-8 (ill-formed sequence at byte ", *bad, ")");
}

}  // namespace qwenrt::cli
