// Walks the syntax tree and renders output, with jinja2's runtime semantics: per-iteration loop scopes,
// `set` inside a loop not leaking out of it, macros resolving outer names when called, sandboxed
// attribute access (obj.attr falls back to obj['attr'] and vice versa) and Undefined propagation.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>

#include "text/jinja/jinja_ast.h"
#include "text/jinja/jinja_value.h"

namespace qwenrt::text::jinja {

class Scope {
 public:
  explicit Scope(std::shared_ptr<Scope> parent = nullptr) : parent_(std::move(parent)) {}
  const Value* find(const std::string& name) const;
  void set(const std::string& name, Value value) { vars_[name] = std::move(value); }

 private:
  std::unordered_map<std::string, Value> vars_;
  std::shared_ptr<Scope> parent_;
};
using ScopePtr = std::shared_ptr<Scope>;

class Interpreter {
 public:
  Interpreter() = default;
  Interpreter(const Interpreter&) = delete;
  Interpreter& operator=(const Interpreter&) = delete;
  // Breaks the reference cycles of the objects created during the render (see adopt()).
  ~Interpreter();

  // Registers an object created during this render whose references must be released at the end.
  void adopt(const std::shared_ptr<Object>& object) { adopted_.push_back(object); }
  // Same for an object that is usually freed long before the render ends (a loop object): only its
  // references that are still alive at the end are released.
  void adopt_weak(const std::shared_ptr<Object>& object);

  // Renders `body` in `scope` (normally a child of the globals/context scope).
  std::string render(const Body& body, const ScopePtr& scope);

  Value eval(const Expr& expr, const ScopePtr& scope);
  // Calls anything callable (macros, builtins, bound methods); TypeError otherwise.
  Value call(const Value& callee, CallArgs& args);
  // environment.getattr / environment.getitem of jinja2's ImmutableSandboxedEnvironment.
  Value get_attribute(const Value& object, const std::string& name);
  Value get_item(const Value& object, const Value& key);

  // Used by macros and recursive loops, which run template code on behalf of a call.
  enum class Flow { Normal, Break, Continue };
  Flow exec_body(const Body& body, const ScopePtr& scope, std::string& out);
  void render_loop(const ForStmt& stmt, std::vector<Value> items, const ScopePtr& scope, int depth0, std::string& out);

  // Guards against runaway recursion (a macro calling itself); Python would raise RecursionError.
  class DepthGuard {
   public:
    explicit DepthGuard(Interpreter& interpreter);
    ~DepthGuard() { --interpreter_.depth_; }

   private:
    Interpreter& interpreter_;
  };

 private:
  Flow exec(const Stmt& stmt, const ScopePtr& scope, std::string& out);
  Value eval_inner(const Expr& expr, const ScopePtr& scope);
  void assign(const AssignTarget& target, const Value& value, const ScopePtr& scope);
  CallArgs eval_args(const CallArgExprs& args, const ScopePtr& scope);
  Value apply_filter_chain(const Expr& filter, Value input, const ScopePtr& scope);
  Value eval_slice(const Value& object, const SliceExpr& slice, const ScopePtr& scope);

  // Guards the evaluator's own recursion (statements and expressions being evaluated, across macro
  // calls): bounded by kMaxEvalNesting so that the stack is, whatever the call depth.
  class EvalNest {
   public:
    explicit EvalNest(Interpreter& interpreter);
    ~EvalNest() { --interpreter_.eval_depth_; }

   private:
    Interpreter& interpreter_;
  };

  int depth_ = 0;
  int eval_depth_ = 0;
  std::vector<std::shared_ptr<Object>> adopted_;
  std::vector<std::weak_ptr<Object>> adopted_weak_;
  std::size_t adopted_weak_live_ = 0;
};

}  // namespace qwenrt::text::jinja
