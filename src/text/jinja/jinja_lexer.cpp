// Tokenizes template source like jinja2's lexer under transformers' settings (trim_blocks, lstrip_blocks).
#include "text/jinja/jinja_lexer.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "text/jinja/jinja_error.h"
#include "text/jinja/jinja_unicode.h"
#include "text/unicode/unicode_utf8.h"

namespace qwenrt::text::jinja {
namespace {

[[noreturn]] void fail(const std::string& message, int line) { throw TemplateError(ErrorKind::Syntax, message, line); }

// Normalises \r\n and \r to \n and drops one trailing newline, as jinja2's tokeniter does before lexing.
std::string normalize_source(std::string_view source, bool keep_trailing_newline) {
  std::string out;
  out.reserve(source.size());
  for (std::size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out.push_back('\n');
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out.push_back(source[i]);
    }
  }
  if (!keep_trailing_newline && !out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

int count_newlines(std::string_view s) { return static_cast<int>(std::count(s.begin(), s.end(), '\n')); }

// Length in bytes of the Python-whitespace character at s[pos] (Jinja's \s is Unicode-aware), or 0.
std::size_t whitespace_len(std::string_view s, std::size_t pos) {
  unsigned char b = static_cast<unsigned char>(s[pos]);
  if (b < 0x80) return unicode::is_space(b) ? 1 : 0;
  std::size_t len = (b & 0xE0) == 0xC0 ? 2 : (b & 0xF0) == 0xE0 ? 3 : (b & 0xF8) == 0xF0 ? 4 : 1;
  if (pos + len > s.size()) return 0;
  std::u32string cp = unicode::decode(s.substr(pos, len));
  return (cp.size() == 1 && unicode::is_space(cp[0])) ? len : 0;
}

std::size_t skip_whitespace(std::string_view s, std::size_t pos) {
  while (pos < s.size()) {
    std::size_t n = whitespace_len(s, pos);
    if (n == 0) break;
    pos += n;
  }
  return pos;
}

// Python str.rstrip() without arguments.
std::string_view rstrip_whitespace(std::string_view s) {
  std::u32string cps = unicode::decode(s);
  std::size_t keep_bytes = s.size();
  while (!cps.empty() && unicode::is_space(cps.back())) {
    std::string enc;
    utf8::append(enc, cps.back());
    keep_bytes -= enc.size();
    cps.pop_back();
  }
  return s.substr(0, keep_bytes);
}

bool all_whitespace(std::string_view s) {
  if (s.empty()) return false;  // jinja's whitespace_re is \s+, which needs at least one character
  for (char32_t c : unicode::decode(s)) {
    if (!unicode::is_space(c)) return false;
  }
  return true;
}

// The lstrip_blocks / "-" handling jinja applies to the text in front of a tag (OptionalLStrip).
std::string_view strip_text_before_tag(std::string_view text, char sign, bool is_variable, bool line_starting, const LexerOptions& options) {
  if (sign == '-') return rstrip_whitespace(text);
  if (sign != '+' && options.lstrip_blocks && !is_variable) {
    const std::size_t nl = text.rfind('\n');
    const std::size_t l_pos = nl == std::string_view::npos ? 0 : nl + 1;
    if ((l_pos > 0 || line_starting) && all_whitespace(text.substr(l_pos))) return text.substr(0, l_pos);
  }
  return text;
}

bool is_name_start(unsigned char c) { return std::isalpha(c) || c == '_' || c >= 0x80; }
bool is_name_char(unsigned char c) { return std::isalnum(c) || c == '_' || c >= 0x80; }

class Lexer {
 public:
  Lexer(std::string source, const LexerOptions& options) : src_(std::move(source)), options_(options) {}

  std::vector<Token> run() {
    while (pos_ < src_.size()) lex_root();
    push(TokenType::Eof, "", line_);
    return std::move(tokens_);
  }

 private:
  void push(TokenType type, std::string text, int line) {
    Token t;
    t.type = type;
    t.text = std::move(text);
    t.line = line;
    tokens_.push_back(std::move(t));
  }

  // Advances pos_ to `to`, counting lines.
  void consume_to(std::size_t to) {
    line_ += count_newlines(std::string_view(src_).substr(pos_, to - pos_));
    pos_ = to;
  }

  // Finds the earliest "{{", "{%" or "{#" at or after pos_.
  std::size_t find_tag(std::size_t from) const {
    std::size_t p = from;
    while ((p = src_.find('{', p)) != std::string::npos) {
      if (p + 1 < src_.size() && (src_[p + 1] == '{' || src_[p + 1] == '%' || src_[p + 1] == '#')) return p;
      ++p;
    }
    return std::string::npos;
  }

  // Matches "{%[-+]?\s*raw\s*(-%}\s*|%})" at p; returns the end offset or npos.
  std::size_t match_raw_begin(std::size_t p) const {
    if (src_.compare(p, 2, "{%") != 0) return std::string::npos;
    std::size_t q = p + 2;
    if (q < src_.size() && (src_[q] == '-' || src_[q] == '+')) ++q;
    q = skip_whitespace(src_, q);
    if (src_.compare(q, 3, "raw") != 0) return std::string::npos;
    q += 3;
    q = skip_whitespace(src_, q);
    if (src_.compare(q, 3, "-%}") == 0) return skip_whitespace(src_, q + 3);
    if (src_.compare(q, 2, "%}") == 0) return q + 2;
    return std::string::npos;
  }

  void lex_root() {
    const std::size_t tag = find_tag(pos_);
    if (tag == std::string::npos) {
      push(TokenType::Data, src_.substr(pos_), line_);
      consume_to(src_.size());
      line_starting_ = false;
      return;
    }
    const char kind = src_[tag + 1];
    char sign = 0;
    if (tag + 2 < src_.size() && (src_[tag + 2] == '-' || src_[tag + 2] == '+')) sign = src_[tag + 2];
    const std::string_view text = std::string_view(src_).substr(pos_, tag - pos_);
    const std::string_view kept = strip_text_before_tag(text, sign, kind == '{', line_starting_, options_);
    if (!kept.empty()) push(TokenType::Data, std::string(kept), line_);

    const std::size_t raw_end = kind == '%' ? match_raw_begin(tag) : std::string::npos;
    consume_to(tag);
    const int tag_line = line_;
    if (raw_end != std::string::npos) {
      consume_to(raw_end);
      line_starting_ = src_[raw_end - 1] == '\n';
      lex_raw_body(tag_line);
      return;
    }
    consume_to(tag + 2 + (sign ? 1 : 0));
    line_starting_ = false;
    if (kind == '#') {
      lex_comment(tag_line);
    } else if (kind == '%') {
      push(TokenType::BlockBegin, "{%", tag_line);
      lex_tag(/*is_block=*/true);
    } else {
      push(TokenType::VariableBegin, "{{", tag_line);
      lex_tag(/*is_block=*/false);
    }
  }

  void lex_comment(int start_line) {
    std::size_t p = pos_;
    while ((p = src_.find("#}", p)) != std::string::npos) {
      const bool minus = p > pos_ && src_[p - 1] == '-';
      const bool plus = p > pos_ && src_[p - 1] == '+';
      std::size_t end = p + 2;
      if (minus) {
        end = skip_whitespace(src_, end);
      } else if (!plus && options_.trim_blocks && end < src_.size() && src_[end] == '\n') {
        ++end;
      }
      consume_to(end);
      line_starting_ = src_[end - 1] == '\n';
      return;
    }
    fail("Missing end of comment tag", start_line);
  }

  // Body of {% raw %}: everything up to "{%[-+]?\s*endraw\s*(+%}|-%}\s*|%}\n?)", verbatim.
  void lex_raw_body(int start_line) {
    std::size_t p = pos_;
    while ((p = src_.find("{%", p)) != std::string::npos) {
      std::size_t q = p + 2;
      char sign = 0;
      if (q < src_.size() && (src_[q] == '-' || src_[q] == '+')) sign = src_[q++];
      q = skip_whitespace(src_, q);
      if (src_.compare(q, 6, "endraw") != 0) {
        ++p;
        continue;
      }
      q = skip_whitespace(src_, q + 6);
      std::size_t end;
      if (src_.compare(q, 3, "+%}") == 0) {
        end = q + 3;
      } else if (src_.compare(q, 3, "-%}") == 0) {
        end = skip_whitespace(src_, q + 3);
      } else if (src_.compare(q, 2, "%}") == 0) {
        end = q + 2;
        if (options_.trim_blocks && end < src_.size() && src_[end] == '\n') ++end;
      } else {
        ++p;
        continue;
      }
      const std::string_view text = std::string_view(src_).substr(pos_, p - pos_);
      const std::string_view kept = strip_text_before_tag(text, sign, false, line_starting_, options_);
      if (!kept.empty()) push(TokenType::Data, std::string(kept), line_);
      consume_to(end);
      line_starting_ = src_[end - 1] == '\n';
      return;
    }
    fail("Missing end of raw directive", start_line);
  }

  // Tries to match the closing tag at pos_; on success consumes it (plus the whitespace it trims).
  bool match_tag_end(bool is_block) {
    const std::string_view s(src_);
    if (is_block) {
      if (s.compare(pos_, 3, "+%}") == 0) {
        consume_to(pos_ + 3);
      } else if (s.compare(pos_, 3, "-%}") == 0) {
        consume_to(skip_whitespace(src_, pos_ + 3));
      } else if (s.compare(pos_, 2, "%}") == 0) {
        std::size_t end = pos_ + 2;
        if (options_.trim_blocks && end < src_.size() && src_[end] == '\n') ++end;
        consume_to(end);
      } else {
        return false;
      }
    } else {
      if (s.compare(pos_, 3, "-}}") == 0) {
        consume_to(skip_whitespace(src_, pos_ + 3));
      } else if (s.compare(pos_, 2, "}}") == 0) {
        consume_to(pos_ + 2);
      } else {
        return false;
      }
    }
    line_starting_ = src_[pos_ - 1] == '\n';
    return true;
  }

  void lex_tag(bool is_block) {
    std::vector<char> balance;  // expected closing brackets
    while (true) {
      if (pos_ >= src_.size()) return;  // the parser reports the unexpected end of template
      const int line = line_;
      if (balance.empty()) {
        const int end_line = line_;
        if (match_tag_end(is_block)) {
          push(is_block ? TokenType::BlockEnd : TokenType::VariableEnd, is_block ? "%}" : "}}", end_line);
          return;
        }
      }
      const std::size_t ws = skip_whitespace(src_, pos_);
      if (ws != pos_) {
        consume_to(ws);
        continue;
      }
      const unsigned char c = static_cast<unsigned char>(src_[pos_]);
      if (std::isdigit(c)) {
        lex_number(line);
      } else if (is_name_start(c)) {
        std::size_t end = pos_ + 1;
        while (end < src_.size() && is_name_char(static_cast<unsigned char>(src_[end]))) ++end;
        push(TokenType::Name, src_.substr(pos_, end - pos_), line);
        consume_to(end);
      } else if (c == '\'' || c == '"') {
        lex_string(line);
      } else {
        lex_operator(line, balance);
      }
    }
  }

  static bool digits_with_underscores(const std::string& s, std::size_t& p, bool (*is_digit)(char)) {
    // Matches (_?D)+ style runs: a digit, then optional single underscores between digits.
    if (p >= s.size() || !is_digit(s[p])) return false;
    ++p;
    while (p < s.size()) {
      if (is_digit(s[p])) {
        ++p;
      } else if (s[p] == '_' && p + 1 < s.size() && is_digit(s[p + 1])) {
        p += 2;
      } else {
        break;
      }
    }
    return true;
  }

  void lex_number(int line) {
    auto is_dec = [](char ch) { return ch >= '0' && ch <= '9'; };
    // Float: digits, then either [.digits] e[+-]digits, or .digits (jinja's float_re).
    {
      std::size_t p = pos_;
      digits_with_underscores(src_, p, is_dec);
      std::size_t q = p;
      bool has_fraction = false;
      if (q < src_.size() && src_[q] == '.' && q + 1 < src_.size() && is_dec(src_[q + 1])) {
        ++q;
        digits_with_underscores(src_, q, is_dec);
        has_fraction = true;
      }
      std::size_t r = q;
      bool has_exponent = false;
      if (r < src_.size() && (src_[r] == 'e' || src_[r] == 'E')) {
        std::size_t e = r + 1;
        if (e < src_.size() && (src_[e] == '+' || src_[e] == '-')) ++e;
        if (digits_with_underscores(src_, e, is_dec)) {
          r = e;
          has_exponent = true;
        }
      }
      if (has_fraction || has_exponent) {
        std::string text;
        for (std::size_t i = pos_; i < r; ++i) {
          if (src_[i] != '_') text.push_back(src_[i]);
        }
        Token t;
        t.type = TokenType::Float;
        t.text = src_.substr(pos_, r - pos_);
        t.float_value = std::strtod(text.c_str(), nullptr);
        t.line = line;
        tokens_.push_back(std::move(t));
        consume_to(r);
        return;
      }
    }
    // Integer: 0b/0o/0x prefixes, decimal without leading zeros, or zeros.
    std::size_t p = pos_;
    int base = 10;
    if (src_[p] == '0' && p + 1 < src_.size() && std::strchr("bBoOxX", src_[p + 1]) && src_[p + 1] != '\0') {
      const char prefix = static_cast<char>(std::tolower(static_cast<unsigned char>(src_[p + 1])));
      base = prefix == 'b' ? 2 : prefix == 'o' ? 8 : 16;
      std::size_t q = p + 2;
      auto valid = [base](char ch) {
        if (base == 2) return ch == '0' || ch == '1';
        if (base == 8) return ch >= '0' && ch <= '7';
        return std::isxdigit(static_cast<unsigned char>(ch)) != 0;
      };
      std::size_t start = q;
      while (q < src_.size() && (valid(src_[q]) || (src_[q] == '_' && q + 1 < src_.size() && valid(src_[q + 1])))) ++q;
      if (q == start) {
        base = 10;  // "0b" without digits lexes as 0 then a name
      } else {
        p = q;
      }
    }
    if (base == 10) {
      if (src_[p] == '0') {
        ++p;
        while (p < src_.size() && (src_[p] == '0' || (src_[p] == '_' && p + 1 < src_.size() && src_[p + 1] == '0'))) ++p;
      } else {
        digits_with_underscores(src_, p, is_dec);
      }
    }
    std::string digits;
    for (std::size_t i = pos_ + (base == 10 ? 0 : 2); i < p; ++i) {
      if (src_[i] != '_') digits.push_back(src_[i]);
    }
    errno = 0;
    const long long value = std::strtoll(digits.c_str(), nullptr, base);
    if (errno == ERANGE) {
      throw TemplateError(ErrorKind::Unsupported, "integer literal " + digits + " does not fit in 64 bits", line);
    }
    Token t;
    t.type = TokenType::Integer;
    t.text = src_.substr(pos_, p - pos_);
    t.int_value = value;
    t.line = line;
    tokens_.push_back(std::move(t));
    consume_to(p);
  }

  // Decodes a string literal like Python's "unicode-escape" codec (after jinja's backslashreplace).
  void lex_string(int line) {
    const char quote = src_[pos_];
    std::size_t p = pos_ + 1;
    std::string raw;
    while (true) {
      if (p >= src_.size()) fail("unexpected char " + std::string(1, quote) + " (unterminated string)", line);
      const char ch = src_[p];
      if (ch == quote) break;
      if (ch == '\\' && p + 1 < src_.size()) {
        raw.push_back(ch);
        raw.push_back(src_[p + 1]);
        p += 2;
        continue;
      }
      raw.push_back(ch);
      ++p;
    }
    Token t;
    t.type = TokenType::String;
    t.text = unescape(raw, line);
    t.line = line;
    tokens_.push_back(std::move(t));
    consume_to(p + 1);
  }

  static std::string unescape(const std::string& raw, int line) {
    std::string out;
    out.reserve(raw.size());
    for (std::size_t i = 0; i < raw.size(); ++i) {
      if (raw[i] != '\\' || i + 1 >= raw.size()) {
        out.push_back(raw[i]);
        continue;
      }
      const char e = raw[++i];
      switch (e) {
        case '\n': break;  // line continuation
        case '\\': out.push_back('\\'); break;
        case '\'': out.push_back('\''); break;
        case '"': out.push_back('"'); break;
        case 'a': out.push_back('\a'); break;
        case 'b': out.push_back('\b'); break;
        case 'f': out.push_back('\f'); break;
        case 'n': out.push_back('\n'); break;
        case 'r': out.push_back('\r'); break;
        case 't': out.push_back('\t'); break;
        case 'v': out.push_back('\v'); break;
        case 'x':
        case 'u':
        case 'U': {
          const std::size_t width = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          if (i + width >= raw.size()) {
            fail(std::string("truncated \\") + e + " escape", line);
          }
          std::string hex = raw.substr(i + 1, width);
          for (char h : hex) {
            if (!std::isxdigit(static_cast<unsigned char>(h))) fail(std::string("truncated \\") + e + " escape", line);
          }
          const unsigned long cp = std::stoul(hex, nullptr, 16);
          if (cp > 0x10FFFF) fail("illegal Unicode character", line);
          utf8::append(out, static_cast<char32_t>(cp));
          i += width;
          break;
        }
        case 'N': throw TemplateError(ErrorKind::Unsupported, "\\N{...} escapes in string literals", line);
        default:
          if (e >= '0' && e <= '7') {
            unsigned cp = static_cast<unsigned>(e - '0');
            for (int k = 0; k < 2 && i + 1 < raw.size() && raw[i + 1] >= '0' && raw[i + 1] <= '7'; ++k) {
              cp = cp * 8 + static_cast<unsigned>(raw[++i] - '0');
            }
            utf8::append(out, cp);
          } else {
            // Python keeps unknown escapes such as "\d" verbatim.
            out.push_back('\\');
            out.push_back(e);
          }
      }
    }
    return out;
  }

  void lex_operator(int line, std::vector<char>& balance) {
    static const char* const kTwoChar[] = {"//", "**", "==", "!=", ">=", "<="};
    for (const char* op : kTwoChar) {
      if (src_.compare(pos_, 2, op) == 0) {
        push(TokenType::Operator, op, line);
        consume_to(pos_ + 2);
        return;
      }
    }
    const char c = src_[pos_];
    if (!std::strchr("+-/*%~[](){}><=.:|,;", c) || c == '\0') {
      std::string shown;
      utf8::append(shown, unicode::decode(std::string_view(src_).substr(pos_, 4)).front());
      fail("unexpected char '" + shown + "' at " + std::to_string(pos_), line);
    }
    if (c == '(' || c == '[' || c == '{') {
      balance.push_back(c == '(' ? ')' : c == '[' ? ']' : '}');
    } else if (c == ')' || c == ']' || c == '}') {
      if (balance.empty()) fail(std::string("unexpected '") + c + "'", line);
      const char expected = balance.back();
      balance.pop_back();
      if (expected != c) fail(std::string("unexpected '") + c + "', expected '" + expected + "'", line);
    }
    push(TokenType::Operator, std::string(1, c), line);
    consume_to(pos_ + 1);
  }

  std::string src_;
  LexerOptions options_;
  std::size_t pos_ = 0;
  int line_ = 1;
  bool line_starting_ = true;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> tokenize(std::string_view source, const LexerOptions& options) {
  return Lexer(normalize_source(source, options.keep_trailing_newline), options).run();
}

const char* describe_token_type(TokenType type) {
  switch (type) {
    case TokenType::Data: return "template data / text";
    case TokenType::VariableBegin: return "begin of print statement";
    case TokenType::VariableEnd: return "end of print statement";
    case TokenType::BlockBegin: return "begin of statement block";
    case TokenType::BlockEnd: return "end of statement block";
    case TokenType::Name: return "name";
    case TokenType::String: return "string";
    case TokenType::Integer: return "integer";
    case TokenType::Float: return "float";
    case TokenType::Operator: return "operator";
    case TokenType::Eof: return "end of template";
  }
  return "token";
}

}  // namespace qwenrt::text::jinja
