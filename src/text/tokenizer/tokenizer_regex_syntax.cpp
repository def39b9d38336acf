// Parses the tokenizer regex subset (pattern text -> syntax tree) for tokenizer_regex.cpp.
#include "text/tokenizer/tokenizer_regex_syntax.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <string>

#include "text/tokenizer/tokenizer_error.h"
#include "text/unicode/unicode_data.h"
#include "text/unicode/unicode_utf8.h"

namespace qwenrt::text::regex_syntax {
namespace {

using unicode_data::GeneralCategory;

constexpr uint32_t bit(GeneralCategory c) { return 1u << static_cast<int>(c); }

constexpr uint32_t kLetters =
    bit(GeneralCategory::Lu) | bit(GeneralCategory::Ll) | bit(GeneralCategory::Lt) | bit(GeneralCategory::Lm) | bit(GeneralCategory::Lo);
constexpr uint32_t kMarks = bit(GeneralCategory::Mn) | bit(GeneralCategory::Mc) | bit(GeneralCategory::Me);
constexpr uint32_t kNumbers = bit(GeneralCategory::Nd) | bit(GeneralCategory::Nl) | bit(GeneralCategory::No);
constexpr uint32_t kPunctuation = bit(GeneralCategory::Pc) | bit(GeneralCategory::Pd) | bit(GeneralCategory::Ps) | bit(GeneralCategory::Pe) |
                                  bit(GeneralCategory::Pi) | bit(GeneralCategory::Pf) | bit(GeneralCategory::Po);
constexpr uint32_t kSymbols = bit(GeneralCategory::Sm) | bit(GeneralCategory::Sc) | bit(GeneralCategory::Sk) | bit(GeneralCategory::So);
constexpr uint32_t kSeparators = bit(GeneralCategory::Zs) | bit(GeneralCategory::Zl) | bit(GeneralCategory::Zp);
constexpr uint32_t kOthers =
    bit(GeneralCategory::Cc) | bit(GeneralCategory::Cf) | bit(GeneralCategory::Cs) | bit(GeneralCategory::Co) | bit(GeneralCategory::Cn);

// General-category names Oniguruma accepts in \p{...} (short and long forms).
uint32_t property_mask(std::string_view name) {
  struct Entry {
    std::string_view name;
    uint32_t mask;
  };
  static const Entry kEntries[] = {
      {"L", kLetters},
      {"Letter", kLetters},
      {"M", kMarks},
      {"Mark", kMarks},
      {"Combining_Mark", kMarks},
      {"N", kNumbers},
      {"Number", kNumbers},
      {"P", kPunctuation},
      {"Punctuation", kPunctuation},
      {"S", kSymbols},
      {"Symbol", kSymbols},
      {"Z", kSeparators},
      {"Separator", kSeparators},
      {"C", kOthers},
      {"Other", kOthers},
      {"LC", bit(GeneralCategory::Lu) | bit(GeneralCategory::Ll) | bit(GeneralCategory::Lt)},
      {"Cased_Letter", bit(GeneralCategory::Lu) | bit(GeneralCategory::Ll) | bit(GeneralCategory::Lt)},
  };
  for (const auto& e : kEntries) {
    if (e.name == name) return e.mask;
  }
  static const std::array<std::string_view, unicode_data::kGeneralCategoryCount> kShort = {
      "Cn", "Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Me", "Nd", "Nl", "No", "Pc", "Pd", "Ps",
      "Pe", "Pi", "Pf", "Po", "Sm", "Sc", "Sk", "So", "Zs", "Zl", "Zp", "Cc", "Cf", "Cs", "Co"};
  for (std::size_t i = 0; i < kShort.size(); ++i) {
    if (kShort[i] == name) return 1u << i;
  }
  return 0;
}

class Parser {
 public:
  explicit Parser(std::string_view pattern) : pattern_(pattern) {}

  Tree run() {
    if (const auto bad = utf8::find_invalid(pattern_)) fail(*bad, "pattern is not valid UTF-8");
    tree_.root = parse_alternation();
    if (pos_ != pattern_.size()) fail(pos_, "unbalanced ')'");
    return std::move(tree_);
  }

 private:
  [[noreturn]] void fail(std::size_t at, const std::string& what) const {
    throw TokenizerError("regex pattern \"" + std::string(pattern_) + "\": " + what + " at byte " + std::to_string(at));
  }
  [[noreturn]] void unsupported(std::size_t at, const std::string& what) const {
    fail(at, "unsupported construct " + what +
                 " (the tokenizer's regex engine implements the "
                 "subset used by byte-level BPE pre-tokenizers)");
  }

  bool at_end() const { return pos_ >= pattern_.size(); }
  char peek() const { return pattern_[pos_]; }

  char32_t next_code_point() {
    const char* p = pattern_.data() + pos_;
    const char32_t cp = utf8::decode_valid(p);
    pos_ = static_cast<std::size_t>(p - pattern_.data());
    return cp;
  }

  int add(Node node) {
    int depth = 1;
    for (const int child : node.children) depth = std::max(depth, depths_[static_cast<std::size_t>(child)] + 1);
    if (depth > kMaxRegexTreeDepth) {
      fail(pos_, "pattern nested more than " + std::to_string(kMaxRegexTreeDepth) + " levels deep (groups, quantifiers; limit kMaxRegexTreeDepth)");
    }
    depths_.push_back(depth);
    tree_.nodes.push_back(std::move(node));
    return static_cast<int>(tree_.nodes.size()) - 1;
  }
  int add_class(CharClass c) {
    tree_.classes.push_back(std::move(c));
    Node n;
    n.kind = Node::Kind::Class;
    n.class_index = static_cast<int>(tree_.classes.size()) - 1;
    return add(std::move(n));
  }

  int parse_alternation() {
    std::vector<int> branches{parse_concat()};
    while (!at_end() && peek() == '|') {
      ++pos_;
      branches.push_back(parse_concat());
    }
    if (branches.size() == 1) return branches[0];
    Node n;
    n.kind = Node::Kind::Alternation;
    n.children = std::move(branches);
    return add(std::move(n));
  }

  int parse_concat() {
    std::vector<int> items;
    while (!at_end() && peek() != '|' && peek() != ')') {
      const std::size_t start = pos_;
      const int atom = parse_atom();
      if (start < pattern_.size() && pattern_[start] == '(' && inline_flags_consumed_rest_) {
        // "(?i)rest" already parsed the rest of the enclosing group; no quantifier applies.
        inline_flags_consumed_rest_ = false;
        items.push_back(atom);
        break;
      }
      items.push_back(parse_quantifiers(atom));
    }
    if (items.size() == 1) return items[0];
    Node n;
    n.kind = items.empty() ? Node::Kind::Empty : Node::Kind::Concat;
    n.children = std::move(items);
    return add(std::move(n));
  }

  int parse_quantifiers(int atom) {
    while (!at_end()) {
      const std::size_t start = pos_;
      uint32_t min = 0, max = 0;
      const char c = peek();
      if (c == '*') {
        min = 0, max = kUnbounded, ++pos_;
      } else if (c == '+') {
        min = 1, max = kUnbounded, ++pos_;
      } else if (c == '?') {
        min = 0, max = 1, ++pos_;
      } else if (c == '{') {
        if (!parse_braces(min, max)) return atom;  // not a quantifier: '{' is a literal
      } else {
        return atom;
      }
      bool greedy = true;
      if (!at_end() && peek() == '?') {
        greedy = false;
        ++pos_;
      } else if (!at_end() && peek() == '+') {
        if (c == '{') {
          // Oniguruma (Ruby syntax): {n,m}+ is a greedy interval followed by '+'.
        } else {
          unsupported(pos_, "possessive quantifier");
        }
      }
      if (min > max) fail(start, "quantifier minimum exceeds maximum");
      Node n;
      n.kind = Node::Kind::Repeat;
      n.children = {atom};
      n.min = min;
      n.max = max;
      n.greedy = greedy;
      atom = add(std::move(n));
    }
    return atom;
  }

  // {n}, {n,}, {n,m}, {,m}; returns false (position unchanged) if the text is not one.
  bool parse_braces(uint32_t& min, uint32_t& max) {
    std::size_t p = pos_ + 1;
    auto number = [&](uint32_t& out) {
      const std::size_t begin = p;
      uint64_t v = 0;
      while (p < pattern_.size() && pattern_[p] >= '0' && pattern_[p] <= '9') {
        v = v * 10 + static_cast<uint64_t>(pattern_[p] - '0');
        if (v > 100000) fail(begin, "repetition count too large");
        ++p;
      }
      out = static_cast<uint32_t>(v);
      return p > begin;
    };
    const bool has_min = number(min);
    if (p < pattern_.size() && pattern_[p] == '}') {
      if (!has_min) return false;
      max = min;
    } else if (p < pattern_.size() && pattern_[p] == ',') {
      ++p;
      const bool has_max = number(max);
      if (!has_min && !has_max) return false;
      if (!has_min) min = 0;
      if (!has_max) max = kUnbounded;
      if (p >= pattern_.size() || pattern_[p] != '}') return false;
    } else {
      return false;
    }
    pos_ = p + 1;
    return true;
  }

  int parse_atom() {
    const std::size_t start = pos_;
    const char c = peek();
    switch (c) {
      case '(': return parse_group();
      case '[': return add_class(parse_class());
      case '.': {
        ++pos_;
        CharClass dot;  // Oniguruma's default: any character except newline
        dot.ranges.push_back({U'\n', U'\n'});
        dot.negated = true;
        return add_class(std::move(dot));
      }
      case '^':
      case '$': unsupported(start, std::string("anchor '") + c + "'");
      case '*':
      case '+':
      case '?': fail(start, "quantifier without a preceding expression");
      case '\\': return parse_escape_atom();
      default: {
        const char32_t cp = next_code_point();
        return literal(cp);
      }
    }
  }

  int literal(char32_t cp) {
    Node n;
    n.kind = Node::Kind::Literal;
    n.fold = fold_;
    n.literal = fold_ ? unicode_data::simple_case_fold(cp) : cp;
    return add(std::move(n));
  }

  int parse_group() {
    const std::size_t start = pos_;
    struct Nest {
      int& depth;
      ~Nest() { --depth; }
    } nest{++group_depth_};
    if (group_depth_ > kMaxRegexGroupNesting) {
      fail(start, "groups nested more than " + std::to_string(kMaxRegexGroupNesting) + " levels deep (limit kMaxRegexGroupNesting)");
    }
    ++pos_;  // '('
    const bool saved_fold = fold_;
    int lookahead = 0;  // 1: (?=, -1: (?!
    if (!at_end() && peek() == '?') {
      ++pos_;
      if (at_end()) fail(start, "unterminated group");
      const char k = peek();
      if (k == ':') {
        ++pos_;
      } else if (k == '=' || k == '!') {
        lookahead = k == '=' ? 1 : -1;
        ++pos_;
      } else if (k == '<' || k == '>' || k == 'P' || k == '#' || k == '~') {
        unsupported(start, "group \"(?" + std::string(1, k) +
                               "\" (lookbehind, atomic, named or "
                               "comment group)");
      } else {
        // Flag group: (?i) (?-i) (?i:...) (?-i:...); only the i flag is supported.
        bool on = true;
        bool new_fold = fold_;
        while (!at_end() && peek() != ':' && peek() != ')') {
          const char f = peek();
          if (f == '-') {
            on = false;
          } else if (f == 'i') {
            new_fold = on;
          } else {
            unsupported(pos_, std::string("flag '") + f + "'");
          }
          ++pos_;
        }
        if (at_end()) fail(start, "unterminated group");
        if (peek() == ')') {
          // Oniguruma reads "a(?i)b|c" as "a(?i:b|c)": the flags cover the rest of the
          // enclosing group, alternatives included.
          ++pos_;
          fold_ = new_fold;
          const int rest = parse_alternation();
          fold_ = saved_fold;
          inline_flags_consumed_rest_ = true;
          return rest;
        }
        ++pos_;  // ':'
        fold_ = new_fold;
      }
    }
    // A plain (...) captures in Oniguruma; captures do not affect where a split matches.
    const int inner = parse_alternation();
    if (at_end() || peek() != ')') fail(start, "missing ')'");
    ++pos_;
    fold_ = saved_fold;
    if (lookahead == 0) return inner;
    Node n;
    n.kind = Node::Kind::Lookahead;
    n.children = {inner};
    n.negative = lookahead < 0;
    return add(std::move(n));
  }

  // Escapes that stand for a class (\s \p{L} ...) fill `out` and return true; escapes that
  // stand for one character set `cp` and return false.
  bool parse_escape(CharClass& out, char32_t& cp) {
    const std::size_t start = pos_;
    ++pos_;  // '\'
    if (at_end()) fail(start, "trailing backslash");
    const char e = peek();
    ++pos_;
    switch (e) {
      case 's': out.any_mask |= kAttrWhiteSpaceBit; return true;
      case 'S': out.lacks_masks.push_back(kAttrWhiteSpaceBit); return true;
      case 'd': out.any_mask |= bit(GeneralCategory::Nd); return true;
      case 'D': out.lacks_masks.push_back(bit(GeneralCategory::Nd)); return true;
      case 'p':
      case 'P': {
        bool negate = e == 'P';
        std::string_view name;
        if (!at_end() && peek() == '{') {
          const std::size_t close = pattern_.find('}', pos_);
          if (close == std::string_view::npos) fail(start, "unterminated \\p{");
          name = pattern_.substr(pos_ + 1, close - pos_ - 1);
          pos_ = close + 1;
          if (!name.empty() && name[0] == '^') {
            negate = !negate;
            name.remove_prefix(1);
          }
        } else {
          if (at_end()) fail(start, "incomplete \\p");
          name = pattern_.substr(pos_, 1);
          ++pos_;
        }
        const uint32_t mask = property_mask(name);
        if (mask == 0) unsupported(start, "property \\p{" + std::string(name) + "}");
        if (negate) {
          out.lacks_masks.push_back(mask);
        } else {
          out.any_mask |= mask;
        }
        return true;
      }
      case 'n': cp = U'\n'; return false;
      case 'r': cp = U'\r'; return false;
      case 't': cp = U'\t'; return false;
      case 'f': cp = U'\f'; return false;
      case 'v': cp = U'\v'; return false;
      case 'a': cp = 0x07; return false;
      case 'e': cp = 0x1B; return false;
      case 'x': cp = parse_hex(start); return false;
      case 'u': cp = parse_fixed_hex(start, 4); return false;
      default: break;
    }
    const auto ue = static_cast<unsigned char>(e);
    if (ue >= 0x80 || std::isalnum(ue)) {
      unsupported(start, std::string("escape '\\") + e + "'");
    }
    cp = ue;  // escaped punctuation stands for itself
    return false;
  }

  char32_t parse_hex(std::size_t start) {
    if (!at_end() && peek() == '{') {
      const std::size_t close = pattern_.find('}', pos_);
      if (close == std::string_view::npos) fail(start, "unterminated \\x{");
      const std::string digits(pattern_.substr(pos_ + 1, close - pos_ - 1));
      pos_ = close + 1;
      return checked_code_point(start, digits);
    }
    return parse_fixed_hex(start, 2);
  }

  char32_t parse_fixed_hex(std::size_t start, std::size_t n) {
    if (pos_ + n > pattern_.size()) fail(start, "incomplete hex escape");
    const std::string digits(pattern_.substr(pos_, n));
    pos_ += n;
    return checked_code_point(start, digits);
  }

  char32_t checked_code_point(std::size_t start, const std::string& digits) {
    if (digits.empty() || digits.size() > 6 || digits.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos) {
      fail(start, "bad hex escape");
    }
    const unsigned long v = std::stoul(digits, nullptr, 16);
    if (v > 0x10FFFF || (v >= 0xD800 && v < 0xE000)) fail(start, "hex escape is not a scalar value");
    return static_cast<char32_t>(v);
  }

  int parse_escape_atom() {
    const std::size_t start = pos_;
    if (pos_ + 1 < pattern_.size()) {
      const char e = pattern_[pos_ + 1];
      if (e == 'b' || e == 'B' || e == 'A' || e == 'z' || e == 'Z' || e == 'G') {
        unsupported(start, std::string("anchor '\\") + e + "'");
      }
      if (e >= '1' && e <= '9') unsupported(start, "backreference");
      if (e == 'w' || e == 'W') {
        unsupported(start, "\\w (Oniguruma's word class needs the Alphabetic property)");
      }
    }
    CharClass c;
    char32_t cp = 0;
    if (parse_escape(c, cp)) {
      if (fold_) unsupported(start, "character class inside a case-insensitive group");
      return add_class(std::move(c));
    }
    return literal(cp);
  }

  CharClass parse_class() {
    const std::size_t start = pos_;
    if (fold_) unsupported(start, "character class inside a case-insensitive group");
    ++pos_;  // '['
    CharClass out;
    if (!at_end() && peek() == '^') {
      out.negated = true;
      ++pos_;
    }
    bool first = true;
    while (true) {
      if (at_end()) fail(start, "missing ']'");
      const char c = peek();
      if (c == ']' && !first) {
        ++pos_;
        break;
      }
      first = false;
      if (c == '[') unsupported(pos_, "nested character class");
      if (c == '&' && pos_ + 1 < pattern_.size() && pattern_[pos_ + 1] == '&') {
        unsupported(pos_, "class intersection '&&'");
      }
      char32_t lo = 0;
      if (c == '\\') {
        const std::size_t esc = pos_;
        if (pos_ + 1 < pattern_.size() && (pattern_[pos_ + 1] == 'w' || pattern_[pos_ + 1] == 'W')) {
          unsupported(esc, "\\w");
        }
        if (parse_escape(out, lo)) continue;  // a class escape: no range possible
      } else {
        lo = next_code_point();
      }
      // A range lo-hi, unless '-' is the last character before ']'.
      if (pos_ + 1 < pattern_.size() && peek() == '-' && pattern_[pos_ + 1] != ']') {
        ++pos_;
        char32_t hi = 0;
        if (peek() == '\\') {
          CharClass dummy;
          if (parse_escape(dummy, hi)) fail(pos_, "class escape used as a range end");
        } else if (peek() == '[') {
          unsupported(pos_, "nested character class");
        } else {
          hi = next_code_point();
        }
        if (hi < lo) fail(pos_, "empty range in character class");
        out.ranges.push_back({lo, hi});
      } else {
        out.ranges.push_back({lo, lo});
      }
    }
    std::sort(out.ranges.begin(), out.ranges.end());
    return out;
  }

  static constexpr uint32_t kAttrWhiteSpaceBit = 1u << 30;  // == kAttrWhiteSpace
  std::string_view pattern_;
  std::size_t pos_ = 0;
  bool fold_ = false;
  bool inline_flags_consumed_rest_ = false;
  int group_depth_ = 0;
  std::vector<int> depths_;  // tree depth of each node
  Tree tree_;
};

}  // namespace

bool CharClass::contains(char32_t cp, uint32_t attributes) const {
  bool in = (attributes & any_mask) != 0;
  for (std::size_t i = 0; !in && i < lacks_masks.size(); ++i) in = (attributes & lacks_masks[i]) == 0;
  for (std::size_t i = 0; !in && i < ranges.size(); ++i) {
    in = cp >= ranges[i].first && cp <= ranges[i].second;
  }
  return in != negated;
}

Tree parse(std::string_view pattern) { return Parser(pattern).run(); }

bool can_match_empty(const Tree& tree, int index) {
  const Node& n = tree.nodes[static_cast<std::size_t>(index)];
  switch (n.kind) {
    case Node::Kind::Empty:
    case Node::Kind::Lookahead: return true;
    case Node::Kind::Literal:
    case Node::Kind::Class: return false;
    case Node::Kind::Concat: return std::all_of(n.children.begin(), n.children.end(), [&](int c) { return can_match_empty(tree, c); });
    case Node::Kind::Alternation: return std::any_of(n.children.begin(), n.children.end(), [&](int c) { return can_match_empty(tree, c); });
    case Node::Kind::Repeat: return n.min == 0 || can_match_empty(tree, n.children[0]);
  }
  return true;
}

}  // namespace qwenrt::text::regex_syntax
