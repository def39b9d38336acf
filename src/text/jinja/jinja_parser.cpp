// Parses tokens into the syntax tree with jinja2's grammar; rejects unsupported statements at load.
#include "text/jinja/jinja_parser.h"

#include <algorithm>
#include <set>

#include "text/jinja/jinja_error.h"
#include "text/jinja/jinja_filters.h"
#include "text/jinja/jinja_limits.h"
#include "text/jinja/jinja_tests.h"

namespace qwenrt::text::jinja {
namespace {

[[noreturn]] void fail(const std::string& message, int line) { throw TemplateError(ErrorKind::Syntax, message, line); }

std::string describe(const Token& t) {
  switch (t.type) {
    case TokenType::Name: return t.text;
    case TokenType::Operator: return t.text;
    case TokenType::String: return "string";
    case TokenType::Integer: return "integer";
    case TokenType::Float: return "float";
    default: return describe_token_type(t.type);
  }
}

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : tokens_(std::move(tokens)) {}

  TemplateAst parse() {
    TemplateAst ast;
    ast.body = subparse({});
    if (current().type != TokenType::Eof) fail("unexpected " + describe(current()), current().line);
    return ast;
  }

 private:
  // --- token stream helpers ---
  const Token& current() const { return tokens_[pos_]; }
  const Token& peek(std::size_t ahead = 1) const { return tokens_[std::min(pos_ + ahead, tokens_.size() - 1)]; }
  const Token& next() {
    const Token& t = tokens_[pos_];
    if (pos_ + 1 < tokens_.size()) ++pos_;
    return t;
  }
  bool is_op(const char* op) const { return current().type == TokenType::Operator && current().text == op; }
  bool is_name(const char* name) const { return current().type == TokenType::Name && current().text == name; }
  bool skip_op(const char* op) {
    if (!is_op(op)) return false;
    next();
    return true;
  }
  bool skip_name(const char* name) {
    if (!is_name(name)) return false;
    next();
    return true;
  }
  void expect_op(const char* op) {
    if (!is_op(op)) unexpected(std::string("'") + op + "'");
    next();
  }
  const Token& expect_name() {
    if (current().type != TokenType::Name) unexpected("name");
    return next();
  }
  void expect_name(const char* name) {
    if (!is_name(name)) unexpected(std::string("'") + name + "'");
    next();
  }
  void expect(TokenType type) {
    if (current().type != type) unexpected(std::string("'") + describe_token_type(type) + "'");
    next();
  }
  [[noreturn]] void unexpected(const std::string& expected) {
    if (current().type == TokenType::Eof) fail_eof();
    fail("expected token " + expected + ", got '" + describe(current()) + "'", current().line);
  }

  [[noreturn]] void fail_eof() {
    std::string message = "Unexpected end of template.";
    if (!end_tokens_.empty()) {
      std::string looking;
      for (const auto& name : end_tokens_.back()) {
        if (!looking.empty()) looking += " or ";
        looking += "'" + name + "'";
      }
      message += " Jinja was looking for the following tags: " + looking + ".";
    }
    if (!tag_stack_.empty()) message += " The innermost block that needs to be closed is '" + tag_stack_.back() + "'.";
    fail(message, current().line);
  }

  [[noreturn]] void fail_unknown_tag(const std::string& name, int line) {
    std::string message = "Encountered unknown tag '" + name + "'.";
    bool expected_somewhere = false;
    for (const auto& level : end_tokens_) {
      expected_somewhere |= std::find(level.begin(), level.end(), name) != level.end();
    }
    if (!end_tokens_.empty()) {
      std::string looking;
      for (const auto& n : end_tokens_.back()) {
        if (!looking.empty()) looking += " or ";
        looking += "'" + n + "'";
      }
      if (expected_somewhere) {
        message += " You probably made a nesting mistake. Jinja is expecting this tag, but currently looking for " + looking + ".";
      } else {
        message += " Jinja was looking for the following tags: " + looking + ".";
      }
    }
    if (!tag_stack_.empty()) message += " The innermost block that needs to be closed is '" + tag_stack_.back() + "'.";
    fail(message, line);
  }

  // Nesting guard (kMaxTemplateNesting): every recursion of the parser and every link of an operator
  // chain (a + b + c, x.y.z, v|f|g) deepens the syntax tree, and with it the stack of the parser, the
  // evaluator and the tree's destructor.
  class Nest {
   public:
    explicit Nest(Parser& p, bool enter = true) : p_(p) {
      if (enter) step();
    }
    ~Nest() { p_.nesting_ -= n_; }
    Nest(const Nest&) = delete;
    Nest& operator=(const Nest&) = delete;
    void step() {
      ++n_;
      if (++p_.nesting_ > kMaxTemplateNesting) {
        fail("the template nests blocks, brackets and operators more than " + std::to_string(kMaxTemplateNesting) +
                 " levels deep (limit kMaxTemplateNesting)",
             p_.current().line);
      }
    }

   private:
    Parser& p_;
    int n_ = 0;
  };

  // --- template structure ---
  Body subparse(const std::vector<std::string>& end_tokens) {
    Body body;
    const bool pushed = !end_tokens.empty();
    Nest nest(*this, pushed);
    if (pushed) end_tokens_.push_back(end_tokens);
    while (current().type != TokenType::Eof) {
      const Token& t = current();
      if (t.type == TokenType::Data) {
        body.push_back(std::make_unique<TextStmt>(t.text, t.line));
        next();
      } else if (t.type == TokenType::VariableBegin) {
        next();
        const int line = current().line;
        body.push_back(std::make_unique<PrintStmt>(parse_tuple(false, true, {}, false), line));
        expect(TokenType::VariableEnd);
      } else if (t.type == TokenType::BlockBegin) {
        next();
        if (pushed && current().type == TokenType::Name && std::find(end_tokens.begin(), end_tokens.end(), current().text) != end_tokens.end()) {
          end_tokens_.pop_back();
          return body;
        }
        body.push_back(parse_statement());
        expect(TokenType::BlockEnd);
      } else {
        fail("unexpected " + describe(t), t.line);
      }
    }
    if (pushed) end_tokens_.pop_back();
    return body;
  }

  // Parses "%} body {% <one of end_tokens>" leaving the end token current.
  Body parse_statements(const std::vector<std::string>& end_tokens, bool drop_needle) {
    skip_op(":");
    expect(TokenType::BlockEnd);
    Body body = subparse(end_tokens);
    if (current().type == TokenType::Eof) {
      end_tokens_.push_back(end_tokens);
      fail_eof();
    }
    if (drop_needle) next();
    return body;
  }

  StmtPtr parse_statement() {
    const Token& t = current();
    if (t.type != TokenType::Name) fail("tag name expected", t.line);
    const std::string name = t.text;
    const int line = t.line;
    static const std::set<std::string> kUnsupported = {"block", "extends", "include", "import", "from", "call", "autoescape"};
    if (kUnsupported.count(name)) {
      throw TemplateError(ErrorKind::Unsupported, "the '" + name + "' tag is not supported by qwenrt's chat-template interpreter", line);
    }
    tag_stack_.push_back(name);
    StmtPtr result;
    if (name == "for") {
      result = parse_for();
    } else if (name == "if") {
      result = parse_if();
    } else if (name == "set") {
      result = parse_set();
    } else if (name == "macro") {
      result = parse_macro();
    } else if (name == "filter") {
      result = parse_filter_block();
    } else if (name == "with") {
      result = parse_with();
    } else if (name == "print") {
      result = parse_print();
    } else if (name == "break" || name == "continue") {
      next();
      if (loop_depth_ == 0) fail("'" + name + "' tag outside of a loop", line);
      result = std::make_unique<LoopControlStmt>(name == "break" ? StmtKind::Break : StmtKind::Continue, line);
    } else if (name == "generation") {
      next();
      auto stmt = std::make_unique<GenerationStmt>(line);
      stmt->body = parse_statements({"endgeneration"}, true);
      result = std::move(stmt);
    } else {
      tag_stack_.pop_back();
      fail_unknown_tag(name, line);
    }
    tag_stack_.pop_back();
    return result;
  }

  StmtPtr parse_for() {
    auto stmt = std::make_unique<ForStmt>(next().line);
    stmt->target = parse_assign_target(true, false, {"in"});
    expect_name("in");
    stmt->iterable = parse_tuple(false, false, {"recursive"}, false);
    if (skip_name("if")) stmt->filter = parse_expression(true);
    stmt->recursive = skip_name("recursive");
    ++loop_depth_;
    stmt->body = parse_statements({"endfor", "else"}, false);
    --loop_depth_;
    if (next().text == "else") {
      // The else branch runs when the loop did not iterate; break/continue there belong to an outer loop.
      stmt->else_body = parse_statements({"endfor"}, true);
    }
    return stmt;
  }

  StmtPtr parse_if() {
    auto stmt = std::make_unique<IfStmt>(next().line);
    while (true) {
      ExprPtr test = parse_tuple(false, false, {}, false);
      Body body = parse_statements({"elif", "else", "endif"}, false);
      stmt->branches.emplace_back(std::move(test), std::move(body));
      const Token& t = next();
      if (t.text == "elif") continue;
      if (t.text == "else") stmt->else_body = parse_statements({"endif"}, true);
      break;
    }
    return stmt;
  }

  StmtPtr parse_set() {
    const int line = next().line;
    AssignTarget target = parse_assign_target(true, true, {});
    if (skip_op("=")) {
      auto stmt = std::make_unique<SetStmt>(line);
      stmt->target = std::move(target);
      stmt->value = parse_tuple(false, true, {}, false);
      return stmt;
    }
    auto stmt = std::make_unique<SetBlockStmt>(line);
    stmt->target = std::move(target);
    stmt->filter = parse_filter_chain(nullptr, false);
    stmt->body = parse_statements({"endset"}, true);
    return stmt;
  }

  StmtPtr parse_macro() {
    auto stmt = std::make_unique<MacroStmt>(next().line);
    stmt->name = expect_name().text;
    expect_op("(");
    while (!is_op(")")) {
      if (!stmt->params.empty()) expect_op(",");
      const Token& param = expect_name();
      stmt->params.push_back(param.text);
      if (skip_op("=")) {
        stmt->defaults.push_back(parse_expression(true));
      } else if (!stmt->defaults.empty()) {
        fail("non-default argument follows default argument", param.line);
      }
    }
    expect_op(")");
    const std::size_t names_before = loaded_names_.size();
    const int saved_loop_depth = loop_depth_;
    loop_depth_ = 0;  // a loop around the macro definition does not make break valid inside it
    stmt->body = parse_statements({"endmacro"}, true);
    loop_depth_ = saved_loop_depth;
    for (std::size_t i = names_before; i < loaded_names_.size(); ++i) {
      stmt->uses_varargs |= loaded_names_[i] == "varargs";
      stmt->uses_kwargs |= loaded_names_[i] == "kwargs";
      stmt->uses_caller |= loaded_names_[i] == "caller";
    }
    if (stmt->uses_caller) {
      throw TemplateError(ErrorKind::Unsupported, "macros using 'caller' ({% call %} blocks) are not supported", stmt->line);
    }
    return stmt;
  }

  StmtPtr parse_filter_block() {
    auto stmt = std::make_unique<FilterBlockStmt>(next().line);
    stmt->filter = parse_filter_chain(nullptr, true);
    stmt->body = parse_statements({"endfilter"}, true);
    return stmt;
  }

  StmtPtr parse_with() {
    auto stmt = std::make_unique<WithStmt>(next().line);
    while (current().type != TokenType::BlockEnd) {
      if (!stmt->targets.empty()) expect_op(",");
      stmt->targets.push_back(parse_assign_target(false, false, {}));
      expect_op("=");
      stmt->values.push_back(parse_expression(true));
    }
    stmt->body = parse_statements({"endwith"}, true);
    return stmt;
  }

  StmtPtr parse_print() {
    const int line = next().line;
    // {% print a, b %} prints the tuple (a, b), like {{ a, b }}.
    auto tuple = std::make_unique<SequenceExpr>(ExprKind::Tuple, line);
    while (current().type != TokenType::BlockEnd) {
      if (!tuple->items.empty()) expect_op(",");
      tuple->items.push_back(parse_expression(true));
    }
    if (tuple->items.size() == 1) return std::make_unique<PrintStmt>(std::move(tuple->items[0]), line);
    return std::make_unique<PrintStmt>(std::move(tuple), line);
  }

  // --- assignment targets ---
  AssignTarget parse_target_primary(bool with_namespace) {
    if (is_op("(")) {
      next();
      AssignTarget t = parse_assign_target(true, false, {}, /*explicit_parens=*/true);
      expect_op(")");
      return t;
    }
    const Token& t = current();
    if (t.type != TokenType::Name) fail("can't assign to " + describe(t), t.line);
    if (t.text == "true" || t.text == "false" || t.text == "True" || t.text == "False" || t.text == "none" || t.text == "None") {
      fail("can't assign to 'const'", t.line);
    }
    next();
    AssignTarget target;
    target.line = t.line;
    target.name = t.text;
    if (with_namespace && is_op(".")) {
      next();
      target.kind = AssignTarget::Kind::NamespaceAttr;
      target.attr = expect_name().text;
    }
    return target;
  }

  AssignTarget parse_assign_target(bool with_tuple, bool with_namespace, const std::vector<std::string>& extra_end, bool explicit_parens = false) {
    if (!with_tuple) return parse_target_primary(with_namespace);
    AssignTarget tuple;
    tuple.kind = AssignTarget::Kind::Tuple;
    tuple.line = current().line;
    bool is_tuple = false;
    while (true) {
      if (!tuple.items.empty()) expect_op(",");
      if (is_tuple_end(extra_end)) break;
      tuple.items.push_back(parse_target_primary(with_namespace));
      if (is_op(",")) {
        is_tuple = true;
      } else {
        break;
      }
    }
    if (!is_tuple) {
      if (tuple.items.empty()) fail("Expected an expression, got '" + describe(current()) + "'", current().line);
      return std::move(tuple.items[0]);
    }
    (void)explicit_parens;
    return tuple;
  }

  // --- expressions (precedence climbing exactly like jinja2.parser) ---
  bool is_tuple_end(const std::vector<std::string>& extra_end) const {
    const Token& t = current();
    if (t.type == TokenType::VariableEnd || t.type == TokenType::BlockEnd || (t.type == TokenType::Operator && t.text == ")")) {
      return true;
    }
    if (t.type == TokenType::Name) {
      return std::find(extra_end.begin(), extra_end.end(), t.text) != extra_end.end();
    }
    return t.type == TokenType::Eof;
  }

  ExprPtr parse_tuple(bool simplified, bool with_condexpr, const std::vector<std::string>& extra_end, bool explicit_parentheses) {
    const int line = current().line;
    std::vector<ExprPtr> items;
    bool is_tuple = false;
    while (true) {
      if (!items.empty()) expect_op(",");
      if (is_tuple_end(extra_end)) break;
      items.push_back(simplified ? parse_primary() : parse_expression(with_condexpr));
      if (is_op(",")) {
        is_tuple = true;
      } else {
        break;
      }
    }
    if (!is_tuple) {
      if (!items.empty()) return std::move(items[0]);
      if (!explicit_parentheses) {
        if (current().type == TokenType::Eof) fail_eof();
        fail("Expected an expression, got '" + describe(current()) + "'", current().line);
      }
    }
    auto tuple = std::make_unique<SequenceExpr>(ExprKind::Tuple, line);
    tuple->items = std::move(items);
    return tuple;
  }

  ExprPtr parse_expression(bool with_condexpr) { return with_condexpr ? parse_condexpr() : parse_or(); }

  ExprPtr parse_condexpr() {
    int line = current().line;
    ExprPtr expr1 = parse_or();
    Nest nest(*this, false);
    while (skip_name("if")) {
      nest.step();
      auto cond = std::make_unique<CondExpr>(line);
      cond->test = parse_or();
      if (skip_name("else")) cond->else_expr = parse_condexpr();
      cond->then_expr = std::move(expr1);
      expr1 = std::move(cond);
      line = current().line;
    }
    return expr1;
  }

  ExprPtr parse_or() {
    int line = current().line;
    ExprPtr left = parse_and();
    Nest nest(*this, false);
    while (skip_name("or")) {
      nest.step();
      left = std::make_unique<BinaryExpr>(BinaryOp::Or, std::move(left), parse_and(), line);
      line = current().line;
    }
    return left;
  }

  ExprPtr parse_and() {
    int line = current().line;
    ExprPtr left = parse_not();
    Nest nest(*this, false);
    while (skip_name("and")) {
      nest.step();
      left = std::make_unique<BinaryExpr>(BinaryOp::And, std::move(left), parse_not(), line);
      line = current().line;
    }
    return left;
  }

  ExprPtr parse_not() {
    if (is_name("not")) {
      Nest nest(*this);
      const int line = next().line;
      return std::make_unique<UnaryExpr>(UnaryOp::Not, parse_not(), line);
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    const int line = current().line;
    ExprPtr expr = parse_math1();
    std::unique_ptr<CompareExpr> cmp;
    auto add = [&](CompareOp op) {
      if (!cmp) cmp = std::make_unique<CompareExpr>(std::move(expr), line);
      cmp->rest.emplace_back(op, parse_math1());
    };
    while (true) {
      const Token& t = current();
      if (t.type == TokenType::Operator && (t.text == "==" || t.text == "!=" || t.text == "<" || t.text == "<=" || t.text == ">" || t.text == ">=")) {
        const std::string op = t.text;
        next();
        add(op == "=="   ? CompareOp::Eq
            : op == "!=" ? CompareOp::Ne
            : op == "<"  ? CompareOp::Lt
            : op == "<=" ? CompareOp::Le
            : op == ">"  ? CompareOp::Gt
                         : CompareOp::Ge);
      } else if (skip_name("in")) {
        add(CompareOp::In);
      } else if (is_name("not") && peek().type == TokenType::Name && peek().text == "in") {
        next();
        next();
        add(CompareOp::NotIn);
      } else {
        break;
      }
    }
    if (!cmp) return expr;
    return cmp;
  }

  ExprPtr parse_math1() {
    int line = current().line;
    ExprPtr left = parse_concat();
    Nest nest(*this, false);
    while (is_op("+") || is_op("-")) {
      nest.step();
      const BinaryOp op = next().text == "+" ? BinaryOp::Add : BinaryOp::Sub;
      left = std::make_unique<BinaryExpr>(op, std::move(left), parse_concat(), line);
      line = current().line;
    }
    return left;
  }

  ExprPtr parse_concat() {
    const int line = current().line;
    ExprPtr first = parse_math2();
    if (!is_op("~")) return first;
    auto concat = std::make_unique<ConcatExpr>(line);
    concat->parts.push_back(std::move(first));
    while (skip_op("~")) concat->parts.push_back(parse_math2());
    return concat;
  }

  ExprPtr parse_math2() {
    int line = current().line;
    ExprPtr left = parse_pow();
    Nest nest(*this, false);
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      nest.step();
      const std::string op = next().text;
      const BinaryOp bop = op == "*" ? BinaryOp::Mul : op == "/" ? BinaryOp::Div : op == "//" ? BinaryOp::FloorDiv : BinaryOp::Mod;
      left = std::make_unique<BinaryExpr>(bop, std::move(left), parse_pow(), line);
      line = current().line;
    }
    return left;
  }

  ExprPtr parse_pow() {
    int line = current().line;
    ExprPtr left = parse_unary(true);
    Nest nest(*this, false);
    while (skip_op("**")) {
      nest.step();
      left = std::make_unique<BinaryExpr>(BinaryOp::Pow, std::move(left), parse_unary(true), line);
      line = current().line;
    }
    return left;
  }

  ExprPtr parse_unary(bool with_filter) {
    Nest nest(*this);
    const int line = current().line;
    ExprPtr node;
    if (skip_op("-")) {
      node = std::make_unique<UnaryExpr>(UnaryOp::Neg, parse_unary(false), line);
    } else if (skip_op("+")) {
      node = std::make_unique<UnaryExpr>(UnaryOp::Pos, parse_unary(false), line);
    } else {
      node = parse_primary();
    }
    node = parse_postfix(std::move(node));
    if (with_filter) node = parse_filter_expr(std::move(node));
    return node;
  }

  ExprPtr parse_primary() {
    const Token& t = current();
    const int line = t.line;
    switch (t.type) {
      case TokenType::Name: {
        next();
        if (t.text == "true" || t.text == "True") return std::make_unique<ConstExpr>(Value::boolean(true), line);
        if (t.text == "false" || t.text == "False") return std::make_unique<ConstExpr>(Value::boolean(false), line);
        if (t.text == "none" || t.text == "None") return std::make_unique<ConstExpr>(Value::none(), line);
        loaded_names_.push_back(t.text);
        return std::make_unique<NameExpr>(t.text, line);
      }
      case TokenType::String: {
        std::string text;
        while (current().type == TokenType::String) text += next().text;  // adjacent literals concatenate
        return std::make_unique<ConstExpr>(Value::string(std::move(text)), line);
      }
      case TokenType::Integer: next(); return std::make_unique<ConstExpr>(Value::integer(t.int_value), line);
      case TokenType::Float: next(); return std::make_unique<ConstExpr>(Value::number(t.float_value), line);
      case TokenType::Operator:
        if (t.text == "(") {
          next();
          ExprPtr inner = parse_tuple(false, true, {}, true);
          expect_op(")");
          return inner;
        }
        if (t.text == "[") return parse_list();
        if (t.text == "{") return parse_dict();
        break;
      case TokenType::Eof: fail_eof();
      default: break;
    }
    fail("unexpected '" + describe(t) + "'", line);
  }

  ExprPtr parse_list() {
    auto list = std::make_unique<SequenceExpr>(ExprKind::List, next().line);
    while (!is_op("]")) {
      if (!list->items.empty()) expect_op(",");
      if (is_op("]")) break;
      list->items.push_back(parse_expression(true));
    }
    expect_op("]");
    return list;
  }

  ExprPtr parse_dict() {
    auto dict = std::make_unique<DictExpr>(next().line);
    while (!is_op("}")) {
      if (!dict->items.empty()) expect_op(",");
      if (is_op("}")) break;
      ExprPtr key = parse_expression(true);
      expect_op(":");
      ExprPtr value = parse_expression(true);
      dict->items.emplace_back(std::move(key), std::move(value));
    }
    expect_op("}");
    return dict;
  }

  ExprPtr parse_postfix(ExprPtr node) {
    Nest nest(*this, false);
    while (true) {
      nest.step();
      if (is_op(".") || is_op("[")) {
        node = parse_subscript(std::move(node));
      } else if (is_op("(")) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }

  ExprPtr parse_filter_expr(ExprPtr node) {
    Nest nest(*this, false);
    while (true) {
      nest.step();
      if (is_op("|")) {
        node = parse_filter_chain(std::move(node), false);
      } else if (is_name("is")) {
        node = parse_test(std::move(node));
      } else if (is_op("(")) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr node) {
    const Token& t = next();
    const int line = t.line;
    if (t.text == ".") {
      const Token& attr = next();
      if (attr.type == TokenType::Name) return std::make_unique<GetAttrExpr>(std::move(node), attr.text, line);
      if (attr.type != TokenType::Integer) fail("expected name or number", attr.line);
      return std::make_unique<GetItemExpr>(std::move(node), std::make_unique<ConstExpr>(Value::integer(attr.int_value), attr.line), line);
    }
    std::vector<ExprPtr> args;
    while (!is_op("]")) {
      if (!args.empty()) expect_op(",");
      args.push_back(parse_subscribed());
    }
    expect_op("]");
    if (args.size() == 1) return std::make_unique<GetItemExpr>(std::move(node), std::move(args[0]), line);
    auto tuple = std::make_unique<SequenceExpr>(ExprKind::Tuple, line);
    tuple->items = std::move(args);
    return std::make_unique<GetItemExpr>(std::move(node), std::move(tuple), line);
  }

  ExprPtr parse_subscribed() {
    const int line = current().line;
    ExprPtr start;
    if (is_op(":")) {
      next();
    } else {
      ExprPtr node = parse_expression(true);
      if (!is_op(":")) return node;
      next();
      start = std::move(node);
    }
    auto slice = std::make_unique<SliceExpr>(line);
    slice->start = std::move(start);
    if (!is_op(":") && !is_op("]") && !is_op(",")) slice->stop = parse_expression(true);
    if (skip_op(":")) {
      if (!is_op("]") && !is_op(",")) slice->step = parse_expression(true);
    }
    return slice;
  }

  CallArgExprs parse_call_args() {
    const int line = current().line;
    expect_op("(");
    CallArgExprs args;
    bool require_comma = false;
    auto ensure = [&](bool ok) {
      if (!ok) fail("invalid syntax for function call expression", line);
    };
    while (!is_op(")")) {
      if (require_comma) {
        expect_op(",");
        if (is_op(")")) break;
      }
      if (skip_op("*")) {
        ensure(!args.star_args && !args.star_kwargs);
        args.star_args = parse_expression(true);
      } else if (skip_op("**")) {
        ensure(!args.star_kwargs);
        args.star_kwargs = parse_expression(true);
      } else if (current().type == TokenType::Name && peek().type == TokenType::Operator && peek().text == "=") {
        ensure(!args.star_kwargs);
        std::string key = next().text;
        next();
        args.keywords.emplace_back(std::move(key), parse_expression(true));
      } else {
        ensure(!args.star_args && !args.star_kwargs && args.keywords.empty());
        args.positional.push_back(parse_expression(true));
      }
      require_comma = true;
    }
    expect_op(")");
    return args;
  }

  ExprPtr parse_call(ExprPtr callee) {
    auto call = std::make_unique<CallExpr>(std::move(callee), current().line);
    call->args = parse_call_args();
    return call;
  }

  std::string parse_dotted_name() {
    std::string name = expect_name().text;
    while (skip_op(".")) name += "." + expect_name().text;
    return name;
  }

  // `| name(args) | name2 ...`; with start_inline the first filter has no leading pipe ({% filter %}).
  ExprPtr parse_filter_chain(ExprPtr node, bool start_inline) {
    Nest nest(*this, false);
    while (is_op("|") || start_inline) {
      nest.step();
      if (!start_inline) next();
      const int line = current().line;
      const std::string name = parse_dotted_name();
      if (!is_jinja_filter_name(name)) fail("No filter named '" + name + "'.", line);
      auto filter = std::make_unique<FilterExpr>(std::move(node), name, line);
      if (is_op("(")) filter->args = parse_call_args();
      node = std::move(filter);
      start_inline = false;
    }
    return node;
  }

  ExprPtr parse_test(ExprPtr node) {
    const int line = next().line;  // "is"
    const bool negated = skip_name("not");
    const std::string name = parse_dotted_name();
    if (!is_jinja_test_name(name)) fail("No test named '" + name + "'.", line);
    auto test = std::make_unique<TestExpr>(std::move(node), name, line);
    const Token& t = current();
    if (is_op("(")) {
      test->args = parse_call_args();
    } else if ((t.type == TokenType::Name || t.type == TokenType::String || t.type == TokenType::Integer || t.type == TokenType::Float ||
                (t.type == TokenType::Operator && (t.text == "[" || t.text == "{"))) &&
               !(t.type == TokenType::Name && (t.text == "else" || t.text == "or" || t.text == "and"))) {
      if (is_name("is")) fail("You cannot chain multiple tests with is", t.line);
      ExprPtr arg = parse_postfix(parse_primary());
      test->args.positional.push_back(std::move(arg));
    }
    if (negated) return std::make_unique<UnaryExpr>(UnaryOp::Not, std::move(test), line);
    return test;
  }

  std::vector<Token> tokens_;
  std::size_t pos_ = 0;
  std::vector<std::vector<std::string>> end_tokens_;
  std::vector<std::string> tag_stack_;
  std::vector<std::string> loaded_names_;
  int loop_depth_ = 0;
  int nesting_ = 0;
};

}  // namespace

TemplateAst parse_template(std::string_view source, const LexerOptions& options) { return Parser(tokenize(source, options)).parse(); }

}  // namespace qwenrt::text::jinja
