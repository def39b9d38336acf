// Errors raised while parsing or rendering a Jinja template. Every error carries the template line
// (1-based; 0 when unknown) so a failing chat template can be located without a debugger.
#pragma once

#include <stdexcept>
#include <string>

#include "core/error.h"

namespace qwenrt::text::jinja {

enum class ErrorKind {
  Syntax,       // malformed template, or a construct outside the supported subset
  Undefined,    // an operation on an undefined value (jinja2.UndefinedError)
  Type,         // a Python TypeError/ValueError equivalent (wrong operand types, bad arguments)
  Security,     // refused by the sandbox (jinja2.SecurityError), e.g. list.append
  Raised,       // the template called raise_exception(message)
  Unsupported,  // valid Jinja that this interpreter deliberately does not implement
  Runtime,      // anything else (jinja2.TemplateRuntimeError)
};

const char* error_kind_name(ErrorKind kind);

// A qwenrt::Error (so front ends report it as a user-facing error), and a std::runtime_error.
class TemplateError : public qwenrt::Error {
 public:
  TemplateError(ErrorKind kind, std::string message, int line = 0);

  ErrorKind kind() const { return kind_; }
  // The message without the line suffix; for ErrorKind::Raised exactly the template's argument.
  const std::string& message() const { return message_; }
  int line() const { return line_; }
  // Attaches a line to an error raised below the evaluator (where lines are unknown). Keeps an
  // existing line: the innermost node that knew its line is the most precise.
  void set_line_if_unknown(int line);

 private:
  static std::string format(ErrorKind kind, const std::string& message, int line);

  ErrorKind kind_;
  std::string message_;
  int line_;
};

[[noreturn]] void throw_type_error(const std::string& message);
[[noreturn]] void throw_runtime_error(const std::string& message);
[[noreturn]] void throw_unsupported(const std::string& message);

}  // namespace qwenrt::text::jinja
