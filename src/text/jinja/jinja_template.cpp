// Template: parse once, render many; JSON -> template values.
#include "text/jinja/jinja_template.h"

#include "text/jinja/jinja_globals.h"
#include "text/jinja/jinja_interpreter.h"
#include "text/jinja/jinja_parser.h"

namespace qwenrt::text::jinja {

Template Template::parse(std::string_view source) { return Template(std::make_shared<const TemplateAst>(parse_template(source))); }

std::string Template::render(const nlohmann::ordered_json& context, const RenderLimits& limits) const {
  if (!context.is_object()) throw_type_error("the template context must be a JSON object");
  RenderScope budget(limits);  // the conversion is bounded too (string and list sizes)
  return render(value_from_json(context), limits);
}

std::string Template::render(const Value& context, const RenderLimits& limits) const {
  if (!context.is_dict()) throw_type_error("the template context must be a mapping");
  RenderScope budget(limits);
  // Scopes: globals <- caller's variables <- template top level. Variables shadow globals (a context
  // entry named "namespace" wins), and top-level {% set %} shadows both, as in jinja2.
  auto globals = std::make_shared<Scope>();
  install_globals(*globals);
  auto variables = std::make_shared<Scope>(globals);
  for (const auto& [k, v] : context.as_dict().entries()) {
    if (!k.is_string()) throw_type_error("template variable names must be strings");
    variables->set(k.as_string(), v);
  }
  auto top = std::make_shared<Scope>(variables);
  Interpreter interpreter;
  return interpreter.render(ast_->body, top);
}

namespace {

Value value_from_json_at(const nlohmann::ordered_json& json, int depth);

}  // namespace

Value value_from_json(const nlohmann::ordered_json& json) { return value_from_json_at(json, 0); }

namespace {

Value value_from_json_at(const nlohmann::ordered_json& json, int depth) {
  using T = nlohmann::ordered_json::value_t;
  switch (json.type()) {
    case T::null:
    case T::discarded: return Value::none();
    case T::boolean: return Value::boolean(json.get<bool>());
    case T::number_integer: return Value::integer(json.get<std::int64_t>());
    case T::number_unsigned: {
      const auto u = json.get<std::uint64_t>();
      if (u > static_cast<std::uint64_t>(INT64_MAX)) {
        throw_unsupported("integer " + std::to_string(u) + " does not fit in 64 signed bits");
      }
      return Value::integer(static_cast<std::int64_t>(u));
    }
    case T::number_float: return Value::number(json.get<double>());
    case T::string: return Value::string(json.get<std::string>());
    case T::array: {
      if (depth >= kMaxValueDepth) {
        throw TemplateError(ErrorKind::Runtime, "the template context nests lists and objects more than " + std::to_string(kMaxValueDepth) +
                                                    " levels deep (limit kMaxValueDepth)");
      }
      std::vector<Value> items;
      items.reserve(json.size());
      for (const auto& item : json) items.push_back(value_from_json_at(item, depth + 1));
      return Value::list(std::move(items));
    }
    case T::object: {
      if (depth >= kMaxValueDepth) {
        throw TemplateError(ErrorKind::Runtime, "the template context nests lists and objects more than " + std::to_string(kMaxValueDepth) +
                                                    " levels deep (limit kMaxValueDepth)");
      }
      auto dict = std::make_shared<Dict>();
      for (const auto& [k, v] : json.items()) dict->set(Value::string(k), value_from_json_at(v, depth + 1));
      return Value::dict(dict);
    }
    case T::binary: throw_unsupported("binary JSON values");
  }
  return Value::none();
}

}  // namespace

}  // namespace qwenrt::text::jinja
