// The syntax tree the parser builds and the interpreter walks. Node kinds mirror jinja2.nodes for the
// supported subset; every node records its template line for error messages.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "text/jinja/jinja_value.h"

namespace qwenrt::text::jinja {

// --- expressions ---------------------------------------------------------------------------------

enum class ExprKind {
  Const,
  Name,
  List,
  Tuple,
  Dict,
  GetAttr,
  GetItem,
  Slice,
  Call,
  Filter,
  Test,
  Unary,
  Binary,
  Concat,
  Compare,
  CondExpr,
};

struct Expr {
  Expr(ExprKind k, int l) : kind(k), line(l) {}
  virtual ~Expr() = default;
  ExprKind kind;
  int line;
};
using ExprPtr = std::unique_ptr<Expr>;

struct ConstExpr : Expr {
  ConstExpr(Value v, int l) : Expr(ExprKind::Const, l), value(std::move(v)) {}
  Value value;
};

struct NameExpr : Expr {
  NameExpr(std::string n, int l) : Expr(ExprKind::Name, l), name(std::move(n)) {}
  std::string name;
};

// List and Tuple literals share a node; `kind` tells them apart.
struct SequenceExpr : Expr {
  SequenceExpr(ExprKind k, int l) : Expr(k, l) {}
  std::vector<ExprPtr> items;
};

struct DictExpr : Expr {
  explicit DictExpr(int l) : Expr(ExprKind::Dict, l) {}
  std::vector<std::pair<ExprPtr, ExprPtr>> items;
};

struct GetAttrExpr : Expr {
  GetAttrExpr(ExprPtr o, std::string a, int l) : Expr(ExprKind::GetAttr, l), object(std::move(o)), attr(std::move(a)) {}
  ExprPtr object;
  std::string attr;
};

struct GetItemExpr : Expr {
  GetItemExpr(ExprPtr o, ExprPtr i, int l) : Expr(ExprKind::GetItem, l), object(std::move(o)), index(std::move(i)) {}
  ExprPtr object;
  ExprPtr index;  // may be a SliceExpr
};

struct SliceExpr : Expr {
  explicit SliceExpr(int l) : Expr(ExprKind::Slice, l) {}
  ExprPtr start, stop, step;  // each may be null
};

// Arguments at a call site (also used by filters and tests).
struct CallArgExprs {
  std::vector<ExprPtr> positional;
  std::vector<std::pair<std::string, ExprPtr>> keywords;
  ExprPtr star_args;    // *args
  ExprPtr star_kwargs;  // **kwargs
};

struct CallExpr : Expr {
  CallExpr(ExprPtr c, int l) : Expr(ExprKind::Call, l), callee(std::move(c)) {}
  ExprPtr callee;
  CallArgExprs args;
};

struct FilterExpr : Expr {
  FilterExpr(ExprPtr o, std::string n, int l) : Expr(ExprKind::Filter, l), operand(std::move(o)), name(std::move(n)) {}
  ExprPtr operand;  // null in {% filter %} blocks and {% set x | f %}, where the body is the input
  std::string name;
  CallArgExprs args;
};

struct TestExpr : Expr {
  TestExpr(ExprPtr o, std::string n, int l) : Expr(ExprKind::Test, l), operand(std::move(o)), name(std::move(n)) {}
  ExprPtr operand;
  std::string name;
  CallArgExprs args;
};

enum class UnaryOp { Not, Neg, Pos };
struct UnaryExpr : Expr {
  UnaryExpr(UnaryOp o, ExprPtr e, int l) : Expr(ExprKind::Unary, l), op(o), operand(std::move(e)) {}
  UnaryOp op;
  ExprPtr operand;
};

enum class BinaryOp { Add, Sub, Mul, Div, FloorDiv, Mod, Pow, And, Or };
struct BinaryExpr : Expr {
  BinaryExpr(BinaryOp o, ExprPtr a, ExprPtr b, int l) : Expr(ExprKind::Binary, l), op(o), left(std::move(a)), right(std::move(b)) {}
  BinaryOp op;
  ExprPtr left, right;
};

// a ~ b ~ c
struct ConcatExpr : Expr {
  explicit ConcatExpr(int l) : Expr(ExprKind::Concat, l) {}
  std::vector<ExprPtr> parts;
};

enum class CompareOp { Eq, Ne, Lt, Le, Gt, Ge, In, NotIn };
// Python-style chained comparison: a < b < c.
struct CompareExpr : Expr {
  CompareExpr(ExprPtr f, int l) : Expr(ExprKind::Compare, l), first(std::move(f)) {}
  ExprPtr first;
  std::vector<std::pair<CompareOp, ExprPtr>> rest;
};

// `then_expr if test else else_expr`; else_expr may be null (yields undefined).
struct CondExpr : Expr {
  explicit CondExpr(int l) : Expr(ExprKind::CondExpr, l) {}
  ExprPtr test, then_expr, else_expr;
};

// --- statements ----------------------------------------------------------------------------------

// Left-hand side of set / for / with: a name, a namespace attribute (ns.x) or a (nested) tuple.
struct AssignTarget {
  enum class Kind { Name, NamespaceAttr, Tuple } kind = Kind::Name;
  std::string name;
  std::string attr;  // NamespaceAttr only
  std::vector<AssignTarget> items;
  int line = 0;
};

enum class StmtKind { Text, Print, If, For, Set, SetBlock, Macro, FilterBlock, With, Break, Continue, Generation };

struct Stmt {
  Stmt(StmtKind k, int l) : kind(k), line(l) {}
  virtual ~Stmt() = default;
  StmtKind kind;
  int line;
};
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct TextStmt : Stmt {
  TextStmt(std::string t, int l) : Stmt(StmtKind::Text, l), text(std::move(t)) {}
  std::string text;
};

struct PrintStmt : Stmt {
  PrintStmt(ExprPtr e, int l) : Stmt(StmtKind::Print, l), expr(std::move(e)) {}
  ExprPtr expr;
};

struct IfStmt : Stmt {
  explicit IfStmt(int l) : Stmt(StmtKind::If, l) {}
  std::vector<std::pair<ExprPtr, Body>> branches;  // if, elif...
  Body else_body;
};

struct ForStmt : Stmt {
  explicit ForStmt(int l) : Stmt(StmtKind::For, l) {}
  AssignTarget target;
  ExprPtr iterable;
  ExprPtr filter;  // `for x in xs if cond`; may be null
  bool recursive = false;
  Body body;
  Body else_body;
};

struct SetStmt : Stmt {
  explicit SetStmt(int l) : Stmt(StmtKind::Set, l) {}
  AssignTarget target;
  ExprPtr value;
};

// {% set x %}...{% endset %}, optionally {% set x | filter %}
struct SetBlockStmt : Stmt {
  explicit SetBlockStmt(int l) : Stmt(StmtKind::SetBlock, l) {}
  AssignTarget target;
  ExprPtr filter;  // a FilterExpr chain whose innermost operand is null; may be null
  Body body;
};

struct MacroStmt : Stmt {
  explicit MacroStmt(int l) : Stmt(StmtKind::Macro, l) {}
  std::string name;
  std::vector<std::string> params;
  std::vector<ExprPtr> defaults;  // for the last defaults.size() params
  Body body;
  // Jinja lets a macro accept extra arguments only if its body refers to varargs / kwargs.
  bool uses_varargs = false;
  bool uses_kwargs = false;
  bool uses_caller = false;
};

struct FilterBlockStmt : Stmt {
  explicit FilterBlockStmt(int l) : Stmt(StmtKind::FilterBlock, l) {}
  ExprPtr filter;  // FilterExpr chain with a null innermost operand
  Body body;
};

struct WithStmt : Stmt {
  explicit WithStmt(int l) : Stmt(StmtKind::With, l) {}
  std::vector<AssignTarget> targets;
  std::vector<ExprPtr> values;
  Body body;
};

struct LoopControlStmt : Stmt {
  LoopControlStmt(StmtKind k, int l) : Stmt(k, l) {}
};

// transformers' {% generation %}...{% endgeneration %}: renders its body (the tag only matters when
// transformers computes assistant-token masks).
struct GenerationStmt : Stmt {
  explicit GenerationStmt(int l) : Stmt(StmtKind::Generation, l) {}
  Body body;
};

struct TemplateAst {
  Body body;
};

}  // namespace qwenrt::text::jinja
