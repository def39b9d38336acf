// Builds the syntax tree from tokens, following jinja2's parser grammar and operator precedence.
// Statements outside the supported subset (extends/include/import/block/call/...) are rejected here,
// with the tag name and line, so an unusable template fails when it is loaded rather than mid-request.
#pragma once

#include <string_view>

#include "text/jinja/jinja_ast.h"
#include "text/jinja/jinja_lexer.h"

namespace qwenrt::text::jinja {

// Throws TemplateError (ErrorKind::Syntax or ErrorKind::Unsupported) with the template line.
TemplateAst parse_template(std::string_view source, const LexerOptions& options = {});

}  // namespace qwenrt::text::jinja
