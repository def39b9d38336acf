// Compiles the syntax tree into a program for a backtracking machine and runs it.
#include "text/tokenizer/tokenizer_regex.h"

#include <array>

#include "text/tokenizer/tokenizer_error.h"
#include "text/tokenizer/tokenizer_regex_syntax.h"
#include "text/unicode/unicode_data.h"
#include "text/unicode/unicode_utf8.h"

namespace qwenrt::text {

namespace {

using regex_syntax::CharClass;
using regex_syntax::kUnbounded;
using regex_syntax::Node;
using regex_syntax::Tree;

// Attribute bits of ASCII, computed once: most text is mostly ASCII.
const std::array<uint32_t, 128>& ascii_attributes() {
  static const std::array<uint32_t, 128> table = [] {
    std::array<uint32_t, 128> t{};
    for (char32_t c = 0; c < 128; ++c) {
      t[c] = (1u << static_cast<int>(unicode_data::general_category(c))) | (unicode_data::is_white_space(c) ? kAttrWhiteSpace : 0u);
    }
    return t;
  }();
  return table;
}

}  // namespace

uint32_t code_point_attributes(char32_t cp) {
  if (cp < 128) return ascii_attributes()[cp];
  return (1u << static_cast<int>(unicode_data::general_category(cp))) | (unicode_data::is_white_space(cp) ? kAttrWhiteSpace : 0u);
}

void DecodedText::assign(std::string_view utf8) {
  code_points.clear();
  attributes.clear();
  byte_offsets.clear();
  code_points.reserve(utf8.size());
  attributes.reserve(utf8.size());
  byte_offsets.reserve(utf8.size() + 1);
  const auto& ascii = ascii_attributes();
  const char* begin = utf8.data();
  const char* p = begin;
  const char* end = begin + utf8.size();
  while (p < end) {
    byte_offsets.push_back(static_cast<uint32_t>(p - begin));
    const auto b = static_cast<unsigned char>(*p);
    if (b < 0x80) {
      ++p;
      code_points.push_back(b);
      attributes.push_back(ascii[b]);
    } else {
      const char32_t cp = utf8::decode_valid(p);
      code_points.push_back(cp);
      attributes.push_back(code_point_attributes(cp));
    }
  }
  byte_offsets.push_back(static_cast<uint32_t>(utf8.size()));
}

// ---------------------------------------------------------------------------------------------
// Program

namespace {

enum class Op : uint8_t {
  Char,       // a: code point
  CharFold,   // a: case-folded code point
  Class,      // a: class index
  Split,      // try a first, then b
  Jump,       // a: target
  Repeat,     // single-character test at pc+1, repeated min..max times; continue at pc+2
  Lookahead,  // sub-program at pc+1 (ends with Match); continue at a; flag: negative
  Match,
};

struct Inst {
  Op op;
  bool flag = false;  // Repeat: greedy; Lookahead: negative
  uint32_t a = 0, b = 0;
  uint32_t min = 0, max = 0;
};

// A class compiled for speed: an ASCII bitmap plus the general test for the rest.
struct CompiledClass {
  std::array<uint64_t, 2> ascii{};
  CharClass general;

  bool contains(char32_t cp, uint32_t attributes) const {
    if (cp < 128) return (ascii[cp >> 6] >> (cp & 63)) & 1u;
    return general.contains(cp, attributes);
  }
};

// A saved alternative for backtracking.
struct Frame {
  enum class Kind : uint8_t { Alternative, GreedyRepeat, LazyRepeat };
  Kind kind;
  uint32_t pc;        // Alternative: where to resume; Repeat*: the Repeat instruction
  std::size_t pos;    // Alternative: position; GreedyRepeat: next end to try; Lazy: current end
  std::size_t bound;  // GreedyRepeat: the lowest end allowed; LazyRepeat: repetitions so far
};

}  // namespace

struct Regex::Program {
  std::string pattern;
  std::vector<Inst> code;
  std::vector<CompiledClass> classes;

  bool test(const Inst& inst, char32_t cp, uint32_t attributes) const {
    switch (inst.op) {
      case Op::Char: return cp == inst.a;
      case Op::CharFold:
        // ASCII folds inline; the table search is only for the rest.
        if (cp < 128) return (cp >= 'A' && cp <= 'Z' ? cp + 32 : cp) == inst.a;
        return unicode_data::simple_case_fold(cp) == inst.a;
      case Op::Class: return classes[inst.a].contains(cp, attributes);
      default: return false;
    }
  }

  // Runs from `pc` at `pos`; frames above the stack's current size belong to this call and are
  // dropped when it returns (that makes lookaheads atomic, as in Oniguruma).
  bool run(const DecodedText& text, uint32_t pc, std::size_t pos, std::size_t& end_pos, uint64_t& steps, uint64_t step_limit,
           std::vector<Frame>& stack) const;

  [[noreturn]] void budget_exceeded(uint64_t limit) const {
    const std::string shown = pattern.size() > 200 ? pattern.substr(0, 200) + "..." : pattern;
    throw TokenizerError("regex pattern \"" + shown + "\": backtracking budget of " + std::to_string(limit) +
                         " steps for this input exceeded (kRegexStepBase + kRegexStepsPerByte per input byte, tokenizer_regex.h)");
  }
};

namespace {

class Compiler {
 public:
  Compiler(const Tree& tree, Regex::Program& program) : tree_(tree), out_(program) {}

  void compile_root() {
    for (const CharClass& c : tree_.classes) {
      CompiledClass cc;
      for (char32_t cp = 0; cp < 128; ++cp) {
        if (c.contains(cp, code_point_attributes(cp))) cc.ascii[cp >> 6] |= uint64_t{1} << (cp & 63);
      }
      cc.general = c;
      out_.classes.push_back(std::move(cc));
    }
    emit_node(tree_.root);
    out_.code.push_back({Op::Match});
  }

 private:
  uint32_t here() const { return static_cast<uint32_t>(out_.code.size()); }
  uint32_t emit(Inst inst) {
    out_.code.push_back(inst);
    return here() - 1;
  }

  bool is_single_character(const Node& n) const { return n.kind == Node::Kind::Literal || n.kind == Node::Kind::Class; }

  Inst single_character_test(const Node& n) const {
    if (n.kind == Node::Kind::Class) return {Op::Class, false, static_cast<uint32_t>(n.class_index)};
    return {n.fold ? Op::CharFold : Op::Char, false, static_cast<uint32_t>(n.literal)};
  }

  void emit_node(int index) {
    const Node& n = tree_.nodes[static_cast<std::size_t>(index)];
    switch (n.kind) {
      case Node::Kind::Empty: return;
      case Node::Kind::Literal:
      case Node::Kind::Class: emit(single_character_test(n)); return;
      case Node::Kind::Concat:
        for (const int c : n.children) emit_node(c);
        return;
      case Node::Kind::Alternation: {
        // Split(L1, next) L1: branch; Jump end ... last branch; end:
        std::vector<uint32_t> jumps;
        for (std::size_t i = 0; i < n.children.size(); ++i) {
          const bool last = i + 1 == n.children.size();
          uint32_t split = 0;
          if (!last) split = emit({Op::Split});
          if (!last) out_.code[split].a = here();
          emit_node(n.children[i]);
          if (!last) {
            jumps.push_back(emit({Op::Jump}));
            out_.code[split].b = here();
          }
        }
        for (const uint32_t j : jumps) out_.code[j].a = here();
        return;
      }
      case Node::Kind::Lookahead: {
        const uint32_t look = emit({Op::Lookahead, n.negative});
        emit_node(n.children[0]);
        emit({Op::Match});
        out_.code[look].a = here();
        return;
      }
      case Node::Kind::Repeat: emit_repeat(n); return;
    }
  }

  void emit_repeat(const Node& n) {
    const Node& child = tree_.nodes[static_cast<std::size_t>(n.children[0])];
    if (is_single_character(child)) {
      emit({Op::Repeat, n.greedy, 0, 0, n.min, n.max});
      emit(single_character_test(child));
      return;
    }
    if (n.max == kUnbounded && regex_syntax::can_match_empty(tree_, n.children[0])) {
      throw TokenizerError("regex pattern \"" + out_.pattern +
                           "\": unsupported construct: unbounded repetition of a group that can "
                           "match the empty string");
    }
    if (n.max != kUnbounded && n.max > 1000) {
      throw TokenizerError("regex pattern \"" + out_.pattern + "\": repetition bound too large");
    }
    for (uint32_t i = 0; i < n.min; ++i) emit_node(n.children[0]);
    if (n.max == kUnbounded) {
      // loop: Split(body, end) body; Jump loop
      const uint32_t loop = emit({Op::Split});
      const uint32_t body = here();
      emit_node(n.children[0]);
      emit({Op::Jump, false, loop});
      set_split(loop, body, here(), n.greedy);
      return;
    }
    // Optional copies: Split(body, end) body ... (each nested inside the previous).
    std::vector<uint32_t> splits;
    for (uint32_t i = n.min; i < n.max; ++i) {
      splits.push_back(emit({Op::Split}));
      emit_node(n.children[0]);
    }
    for (std::size_t i = 0; i < splits.size(); ++i) set_split(splits[i], splits[i] + 1, here(), n.greedy);
  }

  void set_split(uint32_t at, uint32_t body, uint32_t skip, bool greedy) {
    out_.code[at].a = greedy ? body : skip;
    out_.code[at].b = greedy ? skip : body;
  }

  const Tree& tree_;
  Regex::Program& out_;
};

}  // namespace

bool Regex::Program::run(const DecodedText& text, uint32_t pc, std::size_t pos, std::size_t& end_pos, uint64_t& steps, uint64_t step_limit,
                         std::vector<Frame>& stack) const {
  const std::size_t base = stack.size();
  const std::size_t n = text.size();
  const char32_t* cps = text.code_points.data();
  const uint32_t* attrs = text.attributes.data();

  auto backtrack = [&]() -> bool {
    while (stack.size() > base) {
      Frame& f = stack.back();
      if (++steps > step_limit) budget_exceeded(step_limit);
      switch (f.kind) {
        case Frame::Kind::Alternative:
          pc = f.pc;
          pos = f.pos;
          stack.pop_back();
          return true;
        case Frame::Kind::GreedyRepeat:
          pc = f.pc + 2;
          pos = f.pos;
          if (f.pos == f.bound) {
            stack.pop_back();
          } else {
            --f.pos;
          }
          return true;
        case Frame::Kind::LazyRepeat: {
          const Inst& rep = code[f.pc];
          if (f.bound < rep.max && f.pos < n && test(code[f.pc + 1], cps[f.pos], attrs[f.pos])) {
            ++f.pos;
            ++f.bound;
            pc = f.pc + 2;
            pos = f.pos;
            return true;
          }
          stack.pop_back();
          break;
        }
      }
    }
    return false;
  };

  while (true) {
    const Inst& inst = code[pc];
    bool ok = true;
    switch (inst.op) {
      case Op::Char:
      case Op::CharFold:
      case Op::Class:
        if (pos < n && test(inst, cps[pos], attrs[pos])) {
          ++pos;
          ++pc;
        } else {
          ok = false;
        }
        break;
      case Op::Split:
        stack.push_back({Frame::Kind::Alternative, inst.b, pos, 0});
        pc = inst.a;
        break;
      case Op::Jump: pc = inst.a; break;
      case Op::Repeat: {
        const Inst& t = code[pc + 1];
        const std::size_t start = pos;
        const std::size_t want = inst.flag ? inst.max : inst.min;
        std::size_t count = 0;
        while (count < want && pos < n && test(t, cps[pos], attrs[pos])) {
          ++pos;
          ++count;
        }
        if (count < inst.min) {
          ok = false;
          break;
        }
        if (inst.flag) {
          if (count > inst.min) {
            stack.push_back({Frame::Kind::GreedyRepeat, pc, pos - 1, start + inst.min});
          }
        } else {
          stack.push_back({Frame::Kind::LazyRepeat, pc, pos, count});
        }
        pc += 2;
        break;
      }
      case Op::Lookahead: {
        std::size_t ignored = 0;
        const bool matched = run(text, pc + 1, pos, ignored, steps, step_limit, stack);
        if (matched != inst.flag) {
          pc = inst.a;
        } else {
          ok = false;
        }
        break;
      }
      case Op::Match:
        end_pos = pos;
        stack.resize(base);
        return true;
    }
    if (!ok && !backtrack()) return false;
  }
}

Regex::Regex(std::unique_ptr<Program> program) : program_(std::move(program)) {}
Regex::Regex(Regex&&) noexcept = default;
Regex& Regex::operator=(Regex&&) noexcept = default;
Regex::~Regex() = default;

Regex Regex::compile(std::string_view pattern) {
  const Tree tree = regex_syntax::parse(pattern);
  auto program = std::make_unique<Program>();
  program->pattern = std::string(pattern);
  Compiler(tree, *program).compile_root();
  return Regex(std::move(program));
}

const std::string& Regex::pattern() const { return program_->pattern; }

std::optional<RegexMatch> Regex::find(const DecodedText& text, std::size_t from) const {
  RegexBudget budget = RegexBudget::for_input(from < text.size() ? text.size() - from : 0);
  return find(text, from, budget);
}

std::optional<RegexMatch> Regex::find(const DecodedText& text, std::size_t from, RegexBudget& budget) const {
  // Reused across calls so that matching does not allocate.
  thread_local std::vector<Frame> stack;
  stack.clear();
  for (std::size_t start = from; start <= text.size(); ++start) {
    if (++budget.used > budget.limit) program_->budget_exceeded(budget.limit);
    std::size_t end = 0;
    if (program_->run(text, 0, start, end, budget.used, budget.limit, stack)) return RegexMatch{start, end};
  }
  return std::nullopt;
}

}  // namespace qwenrt::text
