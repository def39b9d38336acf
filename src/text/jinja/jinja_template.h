// A compiled Jinja template rendered with the semantics of jinja2's ImmutableSandboxedEnvironment as
// transformers configures it for chat templates (trim_blocks, lstrip_blocks, loopcontrols, its tojson,
// raise_exception and strftime_now). Parse once, render many times; rendering is const and thread-safe.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "text/jinja/jinja_ast.h"
#include "text/jinja/jinja_limits.h"
#include "text/jinja/jinja_value.h"

namespace qwenrt::text::jinja {

class Template {
 public:
  // Throws TemplateError (ErrorKind::Syntax / ErrorKind::Unsupported) naming the template line.
  static Template parse(std::string_view source);

  // `context` must be a JSON object; its keys become template variables. ordered_json keeps the key
  // order of the input, which `tojson` and printing reproduce (Python dicts preserve insertion order).
  // Throws TemplateError (ErrorKind::Runtime) when the render exceeds one of `limits`, and for a
  // context nested deeper than kMaxValueDepth.
  std::string render(const nlohmann::ordered_json& context, const RenderLimits& limits = {}) const;
  // Same with an already converted context (a dict value).
  std::string render(const Value& context, const RenderLimits& limits = {}) const;

 private:
  explicit Template(std::shared_ptr<const TemplateAst> ast) : ast_(std::move(ast)) {}
  std::shared_ptr<const TemplateAst> ast_;
};

// JSON -> template value: objects become dicts (key order kept), arrays lists, numbers int or float as
// Python's json.loads would produce them. Throws TemplateError for JSON nested deeper than kMaxValueDepth.
Value value_from_json(const nlohmann::ordered_json& json);

}  // namespace qwenrt::text::jinja
