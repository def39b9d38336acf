// Splits template source into tokens the way jinja2's lexer does under transformers' settings:
// trim_blocks and lstrip_blocks on, keep_trailing_newline off, "{%- -%}"/"{{- -}}"/"{#- -#}" and the
// "+" markers, {% raw %} blocks, comments dropped, newlines normalised to "\n".
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace qwenrt::text::jinja {

enum class TokenType {
  Data,           // literal template text
  VariableBegin,  // {{
  VariableEnd,    // }}
  BlockBegin,     // {%
  BlockEnd,       // %}
  Name,
  String,
  Integer,
  Float,
  Operator,  // text holds the operator: "+", "//", "==", "(", ...
  Eof,
};

struct Token {
  TokenType type;
  std::string text;  // data text, name, operator, or the decoded string literal
  std::int64_t int_value = 0;
  double float_value = 0.0;
  int line = 1;
};

struct LexerOptions {
  bool trim_blocks = true;
  bool lstrip_blocks = true;
  bool keep_trailing_newline = false;
};

// Throws TemplateError(ErrorKind::Syntax) with the line of the offending character.
std::vector<Token> tokenize(std::string_view source, const LexerOptions& options = {});

const char* describe_token_type(TokenType type);

}  // namespace qwenrt::text::jinja
