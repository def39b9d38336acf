// TemplateError: jinja2-style error names and messages with the template line.
#include "text/jinja/jinja_error.h"

namespace qwenrt::text::jinja {

const char* error_kind_name(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::Syntax: return "TemplateSyntaxError";
    case ErrorKind::Undefined: return "UndefinedError";
    case ErrorKind::Type: return "TypeError";
    case ErrorKind::Security: return "SecurityError";
    case ErrorKind::Raised: return "TemplateError";
    case ErrorKind::Unsupported: return "UnsupportedFeature";
    case ErrorKind::Runtime: return "TemplateRuntimeError";
  }
  return "TemplateError";
}

TemplateError::TemplateError(ErrorKind kind, std::string message, int line)
    : qwenrt::Error(format(kind, message, line)), kind_(kind), message_(std::move(message)), line_(line) {}

std::string TemplateError::format(ErrorKind kind, const std::string& message, int line) {
  std::string out;
  out.append(error_kind_name(kind));
  out.append(": ");
  out.append(message);
  if (line > 0) {
    out.append(" (template line ");
    out.append(std::to_string(line));
    out.append(")");
  }
  return out;
}

void TemplateError::set_line_if_unknown(int line) {
  if (line_ > 0 || line <= 0) return;
  *this = TemplateError(kind_, message_, line);
}

void throw_type_error(const std::string& message) { throw TemplateError(ErrorKind::Type, message); }
void throw_runtime_error(const std::string& message) { throw TemplateError(ErrorKind::Runtime, message); }
void throw_unsupported(const std::string& message) { throw TemplateError(ErrorKind::Unsupported, message); }

}  // namespace qwenrt::text::jinja
