// Rendering: walks the syntax tree with jinja2's scoping, loop, macro and Undefined semantics.
#include "text/jinja/jinja_interpreter.h"

#include <algorithm>

#include "text/jinja/jinja_filters.h"
#include "text/jinja/jinja_limits.h"
#include "text/jinja/jinja_methods.h"
#include "text/jinja/jinja_objects.h"
#include "text/jinja/jinja_operators.h"
#include "text/jinja/jinja_tests.h"
#include "text/jinja/jinja_unicode.h"
#include "text/unicode/unicode_utf8.h"

namespace qwenrt::text::jinja {
namespace {

// A {% macro %} definition bound to the scope it was defined in (names resolve there at call time).
class Macro : public Object {
 public:
  Macro(const MacroStmt& stmt, ScopePtr closure) : stmt_(stmt), closure_(std::move(closure)) {}
  std::string type_name() const override { return "Macro"; }
  void release_references() override { closure_.reset(); }
  std::string repr() const override { return "<Macro '" + stmt_.name + "'>"; }
  std::optional<Value> attribute(const std::string& name) const override {
    if (name == "name") return Value::string(stmt_.name);
    if (name == "catch_kwargs") return Value::boolean(stmt_.uses_kwargs);
    if (name == "catch_varargs") return Value::boolean(stmt_.uses_varargs);
    if (name == "caller") return Value::boolean(false);
    if (name == "arguments") {
      std::vector<Value> names;
      for (const auto& p : stmt_.params) names.push_back(Value::string(p));
      return Value::tuple(std::move(names));
    }
    return std::nullopt;
  }
  bool is_callable() const override { return true; }

  Value call(Interpreter& interpreter, CallArgs& args) override {
    Interpreter::DepthGuard guard(interpreter);
    auto scope = std::make_shared<Scope>(closure_);
    const auto& params = stmt_.params;
    std::vector<bool> bound(params.size(), false);
    std::vector<Value> extra_positional;
    for (std::size_t i = 0; i < args.positional.size(); ++i) {
      if (i < params.size()) {
        scope->set(params[i], args.positional[i]);
        bound[i] = true;
      } else {
        extra_positional.push_back(args.positional[i]);
      }
    }
    if (!extra_positional.empty() && !stmt_.uses_varargs) {
      throw_type_error("macro '" + stmt_.name + "' takes not more than " + std::to_string(params.size()) + " argument(s)");
    }
    auto extra_keywords = std::make_shared<Dict>();
    for (const auto& [key, value] : args.keywords) {
      auto it = std::find(params.begin(), params.end(), key);
      if (it == params.end()) {
        if (!stmt_.uses_kwargs) throw_type_error("macro '" + stmt_.name + "' takes no keyword argument '" + key + "'");
        extra_keywords->set(Value::string(key), value);
        continue;
      }
      const std::size_t i = static_cast<std::size_t>(it - params.begin());
      if (bound[i]) throw_type_error("macro '" + stmt_.name + "' got multiple values for argument '" + key + "'");
      scope->set(key, value);
      bound[i] = true;
    }
    // Defaults are evaluated at call time, in order, so a default may refer to earlier parameters.
    const std::size_t first_default = params.size() - stmt_.defaults.size();
    for (std::size_t i = 0; i < params.size(); ++i) {
      if (bound[i]) continue;
      if (i >= first_default) {
        scope->set(params[i], interpreter.eval(*stmt_.defaults[i - first_default], scope));
      } else {
        scope->set(params[i], Value::undefined("parameter '" + params[i] + "' was not provided"));
      }
    }
    if (stmt_.uses_varargs) scope->set("varargs", Value::tuple(std::move(extra_positional)));
    if (stmt_.uses_kwargs) scope->set("kwargs", Value::dict(extra_keywords));
    std::string out;
    interpreter.exec_body(stmt_.body, scope, out);
    return Value::string(std::move(out));
  }

 private:
  const MacroStmt& stmt_;
  ScopePtr closure_;
};

// The `loop` variable of a for loop.
class LoopObject : public Object {
 public:
  LoopObject(std::shared_ptr<const std::vector<Value>> items, int depth0, const ForStmt* recursive_stmt, ScopePtr scope)
      : items_(std::move(items)), depth0_(depth0), recursive_stmt_(recursive_stmt), scope_(std::move(scope)) {}

  void advance(std::size_t index0) { index0_ = index0; }

  std::string type_name() const override { return "LoopContext"; }
  void release_references() override {
    scope_.reset();
    last_changed_ = Value();
  }
  std::string repr() const override { return "<LoopContext " + std::to_string(index0_ + 1) + "/" + std::to_string(items_->size()) + ">"; }
  bool is_callable() const override { return true; }

  std::optional<Value> attribute(const std::string& name) const override {
    const auto n = static_cast<std::int64_t>(items_->size());
    const auto i = static_cast<std::int64_t>(index0_);
    if (name == "index0") return Value::integer(i);
    if (name == "index") return Value::integer(i + 1);
    if (name == "revindex0") return Value::integer(n - i - 1);
    if (name == "revindex") return Value::integer(n - i);
    if (name == "first") return Value::boolean(i == 0);
    if (name == "last") return Value::boolean(i == n - 1);
    if (name == "length") return Value::integer(n);
    if (name == "depth0") return Value::integer(depth0_);
    if (name == "depth") return Value::integer(depth0_ + 1);
    if (name == "previtem") {
      if (i == 0) return Value::undefined("there is no previous item");
      return (*items_)[index0_ - 1];
    }
    if (name == "nextitem") {
      if (i + 1 >= n) return Value::undefined("there is no next item");
      return (*items_)[index0_ + 1];
    }
    if (name == "cycle") {
      auto self = std::static_pointer_cast<const LoopObject>(shared_from_this());
      return make_function("<bound method LoopContext.cycle>", [self](Interpreter&, CallArgs& args) {
        if (args.positional.empty()) throw_type_error("no items for cycling given");
        return args.positional[self->index0_ % args.positional.size()];
      });
    }
    if (name == "changed") {
      auto self = std::const_pointer_cast<LoopObject>(std::static_pointer_cast<const LoopObject>(shared_from_this()));
      return make_function("<bound method LoopContext.changed>", [self](Interpreter&, CallArgs& args) {
        Value current = Value::tuple(args.positional);
        if (self->has_last_changed_ && equals(self->last_changed_, current)) return Value::boolean(false);
        self->last_changed_ = current;
        self->has_last_changed_ = true;
        return Value::boolean(true);
      });
    }
    return std::nullopt;
  }

  // loop(children) inside a `recursive` loop renders the loop body for the children.
  Value call(Interpreter& interpreter, CallArgs& args) override {
    if (!recursive_stmt_) throw_type_error("The loop must have the 'recursive' marker to be called recursively.");
    if (args.positional.size() != 1 || !args.keywords.empty()) throw_type_error("loop() takes exactly one argument");
    Interpreter::DepthGuard guard(interpreter);
    std::string out;
    interpreter.render_loop(*recursive_stmt_, iterate(args.positional[0]), scope_, depth0_ + 1, out);
    return Value::string(std::move(out));
  }

 private:
  std::shared_ptr<const std::vector<Value>> items_;
  std::size_t index0_ = 0;
  int depth0_;
  const ForStmt* recursive_stmt_;
  ScopePtr scope_;
  Value last_changed_;
  bool has_last_changed_ = false;
};

// Python's slice.indices() followed by element selection.
template <typename T>
std::vector<T> slice_items(const std::vector<T>& items, std::optional<std::int64_t> start, std::optional<std::int64_t> stop, std::int64_t step) {
  const auto n = static_cast<std::int64_t>(items.size());
  auto clamp = [&](std::optional<std::int64_t> v, std::int64_t dflt, bool is_start) {
    if (!v) return dflt;
    std::int64_t x = *v;
    if (x < 0) {
      x += n;
      if (x < 0) x = step < 0 ? -1 : 0;
    } else if (x >= n) {
      x = step < 0 ? n - 1 : n;
    }
    (void)is_start;
    return x;
  };
  const std::int64_t lo = clamp(start, step < 0 ? n - 1 : 0, true);
  const std::int64_t hi = clamp(stop, step < 0 ? -1 : n, false);
  std::vector<T> out;
  if (step > 0) {
    for (std::int64_t i = lo; i < hi; i += step) out.push_back(items[static_cast<std::size_t>(i)]);
  } else {
    for (std::int64_t i = lo; i > hi; i += step) out.push_back(items[static_cast<std::size_t>(i)]);
  }
  return out;
}

std::optional<std::int64_t> slice_bound(const Value& v) {
  if (v.is_none()) return std::nullopt;
  if (v.is_int() || v.is_bool()) return v.to_int();
  if (v.is_undefined()) v.fail_undefined();
  throw_type_error("slice indices must be integers or None or have an __index__ method");
}

Value undefined_attribute(const Value& object, const std::string& name) {
  return Value::undefined("'" + object_type_repr(object) + "' has no attribute '" + name + "'");
}

Value undefined_element(const Value& object, const Value& key) {
  if (key.is_string()) return undefined_attribute(object, key.as_string());
  return Value::undefined(object_type_repr(object) + " has no element " + repr(key));
}

}  // namespace

const Value* Scope::find(const std::string& name) const {
  for (const Scope* s = this; s; s = s->parent_.get()) {
    auto it = s->vars_.find(name);
    if (it != s->vars_.end()) return &it->second;
  }
  return nullptr;
}

Interpreter::DepthGuard::DepthGuard(Interpreter& interpreter) : interpreter_(interpreter) {
  if (++interpreter_.depth_ > active_render_limits().max_call_depth) {
    --interpreter_.depth_;
    throw_runtime_error("maximum recursion depth exceeded (render limit max_call_depth: " + std::to_string(active_render_limits().max_call_depth) +
                        " nested macro or loop() calls)");
  }
}

Interpreter::~Interpreter() {
  for (const auto& object : adopted_) object->release_references();
  for (const auto& weak : adopted_weak_) {
    if (auto object = weak.lock()) object->release_references();
  }
}

void Interpreter::adopt_weak(const std::shared_ptr<Object>& object) {
  // Drop the entries of objects already freed whenever the list doubles: it stays proportional to the
  // objects alive, not to all objects ever created.
  if (adopted_weak_.size() >= 2 * adopted_weak_live_ + 64) {
    std::erase_if(adopted_weak_, [](const std::weak_ptr<Object>& w) { return w.expired(); });
    adopted_weak_live_ = adopted_weak_.size();
  }
  adopted_weak_.push_back(object);
}

Interpreter::EvalNest::EvalNest(Interpreter& interpreter) : interpreter_(interpreter) {
  if (++interpreter_.eval_depth_ > kMaxEvalNesting) {
    --interpreter_.eval_depth_;
    throw_runtime_error("maximum recursion depth exceeded (more than " + std::to_string(kMaxEvalNesting) +
                        " nested statements and expressions being evaluated; limit kMaxEvalNesting)");
  }
}

std::string Interpreter::render(const Body& body, const ScopePtr& scope) {
  std::string out;
  exec_body(body, scope, out);
  return out;
}

Interpreter::Flow Interpreter::exec_body(const Body& body, const ScopePtr& scope, std::string& out) {
  for (const auto& stmt : body) {
    const Flow flow = exec(*stmt, scope, out);
    if (flow != Flow::Normal) return flow;
  }
  return Flow::Normal;
}

Interpreter::Flow Interpreter::exec(const Stmt& stmt, const ScopePtr& scope, std::string& out) {
  try {
    EvalNest nest(*this);
    switch (stmt.kind) {
      case StmtKind::Text:
        out += static_cast<const TextStmt&>(stmt).text;
        check_output_bytes(out.size());
        return Flow::Normal;
      case StmtKind::Print:
        out += to_str(eval(*static_cast<const PrintStmt&>(stmt).expr, scope));
        check_output_bytes(out.size());
        return Flow::Normal;
      case StmtKind::If: {
        const auto& s = static_cast<const IfStmt&>(stmt);
        for (const auto& [test, body] : s.branches) {
          if (truthy(eval(*test, scope))) return exec_body(body, scope, out);
        }
        return exec_body(s.else_body, scope, out);
      }
      case StmtKind::For: {
        const auto& s = static_cast<const ForStmt&>(stmt);
        Value iterable = eval(*s.iterable, scope);
        std::vector<Value> items = iterate(iterable);
        render_loop(s, std::move(items), scope, 0, out);
        return Flow::Normal;
      }
      case StmtKind::Set: {
        const auto& s = static_cast<const SetStmt&>(stmt);
        assign(s.target, eval(*s.value, scope), scope);
        return Flow::Normal;
      }
      case StmtKind::SetBlock: {
        const auto& s = static_cast<const SetBlockStmt&>(stmt);
        std::string captured;
        exec_body(s.body, std::make_shared<Scope>(scope), captured);
        Value value = Value::string(std::move(captured));
        if (s.filter) value = apply_filter_chain(*s.filter, std::move(value), scope);
        assign(s.target, value, scope);
        return Flow::Normal;
      }
      case StmtKind::Macro: {
        const auto& s = static_cast<const MacroStmt&>(stmt);
        auto macro = std::make_shared<Macro>(s, scope);
        adopt(macro);
        scope->set(s.name, Value::object(macro));
        return Flow::Normal;
      }
      case StmtKind::FilterBlock: {
        const auto& s = static_cast<const FilterBlockStmt&>(stmt);
        std::string captured;
        exec_body(s.body, std::make_shared<Scope>(scope), captured);
        out += to_str(apply_filter_chain(*s.filter, Value::string(std::move(captured)), scope));
        check_output_bytes(out.size());
        return Flow::Normal;
      }
      case StmtKind::With: {
        const auto& s = static_cast<const WithStmt&>(stmt);
        auto inner = std::make_shared<Scope>(scope);
        // Values are evaluated in the enclosing scope, like jinja2 does.
        for (std::size_t i = 0; i < s.targets.size(); ++i) assign(s.targets[i], eval(*s.values[i], scope), inner);
        return exec_body(s.body, inner, out);
      }
      case StmtKind::Break: return Flow::Break;
      case StmtKind::Continue: return Flow::Continue;
      case StmtKind::Generation: return exec_body(static_cast<const GenerationStmt&>(stmt).body, scope, out);
    }
  } catch (TemplateError& e) {
    e.set_line_if_unknown(stmt.line);
    throw;
  }
  return Flow::Normal;
}

void Interpreter::render_loop(const ForStmt& stmt, std::vector<Value> items, const ScopePtr& scope, int depth0, std::string& out) {
  // Charged up front (a loop that breaks early is charged for all its items): this also bounds the
  // memory the loop's own copy of the items holds.
  charge_loop_iterations(items.size());
  if (stmt.filter) {
    std::vector<Value> kept;
    for (Value& item : items) {
      auto probe = std::make_shared<Scope>(scope);
      assign(stmt.target, item, probe);
      if (truthy(eval(*stmt.filter, probe))) kept.push_back(std::move(item));
    }
    items = std::move(kept);
  }
  if (items.empty()) {
    exec_body(stmt.else_body, std::make_shared<Scope>(scope), out);
    return;
  }
  auto shared_items = std::make_shared<const std::vector<Value>>(std::move(items));
  auto loop = std::make_shared<LoopObject>(shared_items, depth0, stmt.recursive ? &stmt : nullptr, scope);
  // Weakly: a loop object is freed (with its copy of the items) as soon as the loop ends unless the
  // template kept a reference to it (ns.l = loop), which is when a cycle may need breaking at the end.
  adopt_weak(loop);
  const Value loop_value = Value::object(loop);
  for (std::size_t i = 0; i < shared_items->size(); ++i) {
    loop->advance(i);
    // Each iteration gets a fresh scope: assignments in the body are not visible in the next one.
    auto iteration = std::make_shared<Scope>(scope);
    iteration->set("loop", loop_value);
    assign(stmt.target, (*shared_items)[i], iteration);
    if (exec_body(stmt.body, iteration, out) == Flow::Break) break;
  }
}

void Interpreter::assign(const AssignTarget& target, const Value& value, const ScopePtr& scope) {
  switch (target.kind) {
    case AssignTarget::Kind::Name: scope->set(target.name, value); return;
    case AssignTarget::Kind::NamespaceAttr: {
      const Value* ns = scope->find(target.name);
      Namespace* object = nullptr;
      if (ns && ns->is_object()) object = dynamic_cast<Namespace*>(ns->as_object().get());
      if (!object) {
        throw TemplateError(ErrorKind::Runtime, "cannot assign attribute on non-namespace object", target.line);
      }
      object->set(target.attr, value);
      return;
    }
    case AssignTarget::Kind::Tuple: {
      if (value.is_undefined()) value.fail_undefined();
      std::vector<Value> items = iterate(value);
      const std::size_t want = target.items.size();
      if (items.size() > want) {
        throw_type_error("too many values to unpack (expected " + std::to_string(want) + ")");
      }
      if (items.size() < want) {
        throw_type_error("not enough values to unpack (expected " + std::to_string(want) + ", got " + std::to_string(items.size()) + ")");
      }
      for (std::size_t i = 0; i < want; ++i) assign(target.items[i], items[i], scope);
      return;
    }
  }
}

Value Interpreter::eval(const Expr& expr, const ScopePtr& scope) {
  try {
    EvalNest nest(*this);
    return eval_inner(expr, scope);
  } catch (TemplateError& e) {
    e.set_line_if_unknown(expr.line);
    throw;
  }
}

CallArgs Interpreter::eval_args(const CallArgExprs& args, const ScopePtr& scope) {
  CallArgs out;
  for (const auto& e : args.positional) out.positional.push_back(eval(*e, scope));
  for (const auto& [k, e] : args.keywords) out.keywords.emplace_back(k, eval(*e, scope));
  if (args.star_args) {
    for (Value& v : iterate(eval(*args.star_args, scope))) out.positional.push_back(std::move(v));
  }
  if (args.star_kwargs) {
    Value kw = eval(*args.star_kwargs, scope);
    if (!kw.is_dict()) throw_type_error("argument after ** must be a mapping, not " + type_name(kw));
    for (const auto& [k, v] : kw.as_dict().entries()) {
      if (!k.is_string()) throw_type_error("keywords must be strings");
      out.keywords.emplace_back(k.as_string(), v);
    }
  }
  return out;
}

Value Interpreter::apply_filter_chain(const Expr& filter, Value input, const ScopePtr& scope) {
  const auto& f = static_cast<const FilterExpr&>(filter);
  if (f.operand) input = apply_filter_chain(*f.operand, std::move(input), scope);
  CallArgs args = eval_args(f.args, scope);
  try {
    return apply_filter(*this, f.name, input, args);
  } catch (TemplateError& e) {
    e.set_line_if_unknown(f.line);
    throw;
  }
}

Value Interpreter::eval_slice(const Value& object, const SliceExpr& slice, const ScopePtr& scope) {
  const Value start = slice.start ? eval(*slice.start, scope) : Value::none();
  const Value stop = slice.stop ? eval(*slice.stop, scope) : Value::none();
  const Value step_v = slice.step ? eval(*slice.step, scope) : Value::none();
  if (object.is_undefined()) object.fail_undefined();
  const std::optional<std::int64_t> lo = slice_bound(start);
  const std::optional<std::int64_t> hi = slice_bound(stop);
  const std::int64_t step = slice_bound(step_v).value_or(1);
  if (step == 0) throw_type_error("slice step cannot be zero");
  if (object.is_list()) {
    auto items = slice_items(object.items(), lo, hi, step);
    return object.is_tuple() ? Value::tuple(std::move(items)) : Value::list(std::move(items));
  }
  if (object.is_string()) {
    const std::u32string text = unicode::decode(object.as_string());
    std::vector<char32_t> chars(text.begin(), text.end());
    auto picked = slice_items(chars, lo, hi, step);
    std::string out = unicode::encode(std::u32string(picked.begin(), picked.end()));
    return object.is_markup() ? Value::markup(std::move(out)) : Value::string(std::move(out));
  }
  // Python raises TypeError (e.g. "unhashable type: 'slice'" for dicts); jinja2 turns that into undefined.
  return Value::undefined(object_type_repr(object) + " has no element slice");
}

Value Interpreter::eval_inner(const Expr& expr, const ScopePtr& scope) {
  switch (expr.kind) {
    case ExprKind::Const: return static_cast<const ConstExpr&>(expr).value;
    case ExprKind::Name: {
      const auto& name = static_cast<const NameExpr&>(expr).name;
      if (const Value* v = scope->find(name)) return *v;
      return Value::undefined("'" + name + "' is undefined");
    }
    case ExprKind::List:
    case ExprKind::Tuple: {
      std::vector<Value> items;
      for (const auto& e : static_cast<const SequenceExpr&>(expr).items) items.push_back(eval(*e, scope));
      return expr.kind == ExprKind::List ? Value::list(std::move(items)) : Value::tuple(std::move(items));
    }
    case ExprKind::Dict: {
      auto dict = std::make_shared<Dict>();
      for (const auto& [k, v] : static_cast<const DictExpr&>(expr).items) {
        Value key = eval(*k, scope);
        if ((key.is_list() && !key.is_tuple()) || key.is_dict()) {
          throw_type_error("unhashable type: '" + type_name(key) + "'");
        }
        dict->set(std::move(key), eval(*v, scope));
      }
      return Value::dict(dict);
    }
    case ExprKind::GetAttr: {
      const auto& e = static_cast<const GetAttrExpr&>(expr);
      return get_attribute(eval(*e.object, scope), e.attr);
    }
    case ExprKind::GetItem: {
      const auto& e = static_cast<const GetItemExpr&>(expr);
      Value object = eval(*e.object, scope);
      if (e.index->kind == ExprKind::Slice) return eval_slice(object, static_cast<const SliceExpr&>(*e.index), scope);
      return get_item(object, eval(*e.index, scope));
    }
    case ExprKind::Slice: throw_runtime_error("slice outside of a subscript");
    case ExprKind::Call: {
      const auto& e = static_cast<const CallExpr&>(expr);
      Value callee = eval(*e.callee, scope);
      CallArgs args = eval_args(e.args, scope);
      return call(callee, args);
    }
    case ExprKind::Filter: {
      const auto& e = static_cast<const FilterExpr&>(expr);
      Value input = e.operand ? eval(*e.operand, scope) : Value();
      CallArgs args = eval_args(e.args, scope);
      return apply_filter(*this, e.name, input, args);
    }
    case ExprKind::Test: {
      const auto& e = static_cast<const TestExpr&>(expr);
      Value input = eval(*e.operand, scope);
      CallArgs args = eval_args(e.args, scope);
      return Value::boolean(apply_test(*this, e.name, input, args));
    }
    case ExprKind::Unary: {
      const auto& e = static_cast<const UnaryExpr&>(expr);
      Value v = eval(*e.operand, scope);
      switch (e.op) {
        case UnaryOp::Not: return Value::boolean(!truthy(v));
        case UnaryOp::Neg: return negate(v);
        case UnaryOp::Pos: return unary_plus(v);
      }
      break;
    }
    case ExprKind::Binary: {
      const auto& e = static_cast<const BinaryExpr&>(expr);
      if (e.op == BinaryOp::And) {
        Value left = eval(*e.left, scope);
        return truthy(left) ? eval(*e.right, scope) : left;
      }
      if (e.op == BinaryOp::Or) {
        Value left = eval(*e.left, scope);
        return truthy(left) ? left : eval(*e.right, scope);
      }
      Value left = eval(*e.left, scope);
      Value right = eval(*e.right, scope);
      return apply_binary(e.op, left, right);
    }
    case ExprKind::Concat: {
      std::string out;
      for (const auto& part : static_cast<const ConcatExpr&>(expr).parts) {
        out += to_str(eval(*part, scope));
        check_string_bytes(out.size(), "'~'");
      }
      return Value::string(std::move(out));
    }
    case ExprKind::Compare: {
      const auto& e = static_cast<const CompareExpr&>(expr);
      Value left = eval(*e.first, scope);
      for (const auto& [op, rhs] : e.rest) {
        Value right = eval(*rhs, scope);
        if (!compare(op, left, right)) return Value::boolean(false);
        left = std::move(right);
      }
      return Value::boolean(true);
    }
    case ExprKind::CondExpr: {
      const auto& e = static_cast<const CondExpr&>(expr);
      if (truthy(eval(*e.test, scope))) return eval(*e.then_expr, scope);
      if (e.else_expr) return eval(*e.else_expr, scope);
      return Value::undefined("the inline if-expression on line " + std::to_string(e.line) + " evaluated to false and no else section was defined.");
    }
  }
  throw_runtime_error("unknown expression");
}

Value Interpreter::call(const Value& callee, CallArgs& args) {
  if (callee.is_undefined()) callee.fail_undefined();
  if (callee.is_object() && callee.as_object()->is_callable()) return callee.as_object()->call(*this, args);
  throw_type_error("'" + type_name(callee) + "' object is not callable");
}

Value Interpreter::get_attribute(const Value& object, const std::string& name) {
  switch (object.kind()) {
    case Value::Kind::Undefined: object.fail_undefined();
    case Value::Kind::Dict: {
      // Python attributes win over keys: d.items is the method even if d has an "items" key.
      if (auto method = lookup_method(object, name)) return *method;
      if (const Value* v = object.as_dict().find(std::string_view(name))) return *v;
      return undefined_attribute(object, name);
    }
    case Value::Kind::Object: {
      if (auto v = object.as_object()->attribute(name)) return *v;
      return undefined_attribute(object, name);
    }
    default:
      if (auto method = lookup_method(object, name)) return *method;
      return undefined_attribute(object, name);
  }
}

Value Interpreter::get_item(const Value& object, const Value& key) {
  switch (object.kind()) {
    case Value::Kind::Undefined: object.fail_undefined();
    case Value::Kind::Dict:
      if (const Value* v = object.as_dict().find(key)) return *v;
      break;
    case Value::Kind::List:
    case Value::Kind::String:
      if (key.is_int() || key.is_bool()) {
        std::int64_t i = key.to_int();
        if (object.is_list()) {
          const auto n = static_cast<std::int64_t>(object.items().size());
          if (i < 0) i += n;
          if (i >= 0 && i < n) return object.items()[static_cast<std::size_t>(i)];
        } else {
          const std::u32string text = unicode::decode(object.as_string());
          const auto n = static_cast<std::int64_t>(text.size());
          if (i < 0) i += n;
          if (i >= 0 && i < n) {
            std::string ch;
            utf8::append(ch, text[static_cast<std::size_t>(i)]);
            return object.is_markup() ? Value::markup(std::move(ch)) : Value::string(std::move(ch));
          }
        }
        return undefined_element(object, key);
      }
      break;
    default: break;
  }
  // obj[name] falls back to getattr(obj, name) for string keys (jinja2's Environment.getitem).
  if (key.is_string()) {
    if (object.is_object()) {
      if (auto v = object.as_object()->attribute(key.as_string())) return *v;
    } else if (auto method = lookup_method(object, key.as_string())) {
      return *method;
    }
  }
  return undefined_element(object, key);
}

}  // namespace qwenrt::text::jinja
