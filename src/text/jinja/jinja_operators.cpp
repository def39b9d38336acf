// Python semantics of the operators, comparisons and membership tests templates use.
#include "text/jinja/jinja_operators.h"

#include <cmath>
#include <limits>

#include "text/jinja/jinja_limits.h"

namespace qwenrt::text::jinja {
namespace {

[[noreturn]] void overflow() { throw_unsupported("integer overflow: Python integers are unbounded but this interpreter uses 64 bits"); }

const char* op_symbol(BinaryOp op) {
  switch (op) {
    case BinaryOp::Add: return "+";
    case BinaryOp::Sub: return "-";
    case BinaryOp::Mul: return "*";
    case BinaryOp::Div: return "/";
    case BinaryOp::FloorDiv: return "//";
    case BinaryOp::Mod: return "%";
    case BinaryOp::Pow: return "** or pow()";
    default: return "?";
  }
}

[[noreturn]] void unsupported_operands(BinaryOp op, const Value& a, const Value& b) {
  throw_type_error(std::string("unsupported operand type(s) for ") + op_symbol(op) + ": '" + type_name(a) + "' and '" + type_name(b) + "'");
}

bool is_intlike(const Value& v) { return v.is_int() || v.is_bool(); }

std::int64_t floor_div(std::int64_t a, std::int64_t b) {
  if (a == std::numeric_limits<std::int64_t>::min() && b == -1) overflow();
  std::int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

std::int64_t py_mod(std::int64_t a, std::int64_t b) {
  if (b == -1) return 0;
  std::int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

double py_fmod(double a, double b) {
  double r = std::fmod(a, b);
  if (r != 0.0) {
    if ((r < 0) != (b < 0)) r += b;
  } else {
    r = std::copysign(0.0, b);
  }
  return r;
}

// size * times, saturating (the result is only compared with a limit).
std::size_t repeated_size(std::size_t size, std::int64_t times) {
  if (times <= 0 || size == 0) return 0;
  std::size_t total;
  if (__builtin_mul_overflow(size, static_cast<std::uint64_t>(times), &total)) return SIZE_MAX;
  return total;
}

Value repeat_sequence(const Value& seq, std::int64_t times) {
  if (seq.is_string()) {
    check_string_bytes(repeated_size(seq.as_string().size(), times), "string repetition ('...' * n)");
    std::string out;
    for (std::int64_t i = 0; i < times; ++i) out += seq.as_string();
    return seq.is_markup() ? Value::markup(std::move(out)) : Value::string(std::move(out));
  }
  check_list_items(repeated_size(seq.items().size(), times), "list repetition ([...] * n)");
  std::vector<Value> out;
  for (std::int64_t i = 0; i < times; ++i) out.insert(out.end(), seq.items().begin(), seq.items().end());
  return seq.is_tuple() ? Value::tuple(std::move(out)) : Value::list(std::move(out));
}

Value add(const Value& a, const Value& b) {
  if (is_intlike(a) && is_intlike(b)) {
    std::int64_t r;
    if (__builtin_add_overflow(a.to_int(), b.to_int(), &r)) overflow();
    return Value::integer(r);
  }
  if (a.is_number() && b.is_number()) return Value::number(a.to_double() + b.to_double());
  if (a.is_string() && b.is_string()) {
    check_string_bytes(a.as_string().size() + b.as_string().size(), "string concatenation ('+')");
    // markupsafe: Markup + str escapes the str, and str + Markup does the same via __radd__.
    if (a.is_markup() || b.is_markup()) {
      const std::string left = a.is_markup() ? a.as_string() : html_escape(a.as_string());
      const std::string right = b.is_markup() ? b.as_string() : html_escape(b.as_string());
      return Value::markup(left + right);
    }
    return Value::string(a.as_string() + b.as_string());
  }
  if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple()) {
    check_list_items(a.items().size() + b.items().size(), "list concatenation ('+')");
    std::vector<Value> out = a.items();
    out.insert(out.end(), b.items().begin(), b.items().end());
    return a.is_tuple() ? Value::tuple(std::move(out)) : Value::list(std::move(out));
  }
  if (a.is_string()) {
    throw_type_error("can only concatenate str (not \"" + type_name(b) + "\") to str");
  }
  if (a.is_list()) {
    throw_type_error("can only concatenate " + type_name(a) + " (not \"" + type_name(b) + "\") to " + type_name(a));
  }
  unsupported_operands(BinaryOp::Add, a, b);
}

}  // namespace

std::string html_escape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out.push_back(c);
    }
  }
  return out;
}

Value apply_binary(BinaryOp op, const Value& a, const Value& b) {
  if (a.is_undefined()) a.fail_undefined();
  if (b.is_undefined()) b.fail_undefined();
  switch (op) {
    case BinaryOp::Add: return add(a, b);
    case BinaryOp::Sub:
      if (is_intlike(a) && is_intlike(b)) {
        std::int64_t r;
        if (__builtin_sub_overflow(a.to_int(), b.to_int(), &r)) overflow();
        return Value::integer(r);
      }
      if (a.is_number() && b.is_number()) return Value::number(a.to_double() - b.to_double());
      break;
    case BinaryOp::Mul:
      if (is_intlike(a) && is_intlike(b)) {
        std::int64_t r;
        if (__builtin_mul_overflow(a.to_int(), b.to_int(), &r)) overflow();
        return Value::integer(r);
      }
      if (a.is_number() && b.is_number()) return Value::number(a.to_double() * b.to_double());
      if ((a.is_string() || a.is_list()) && is_intlike(b)) return repeat_sequence(a, b.to_int());
      if ((b.is_string() || b.is_list()) && is_intlike(a)) return repeat_sequence(b, a.to_int());
      if ((a.is_string() || a.is_list()) && b.is_number()) {
        throw_type_error("can't multiply sequence by non-int of type '" + type_name(b) + "'");
      }
      break;
    case BinaryOp::Div:
      if (a.is_number() && b.is_number()) {
        if (b.to_double() == 0.0) throw_type_error("division by zero");
        return Value::number(a.to_double() / b.to_double());
      }
      break;
    case BinaryOp::FloorDiv:
      if (is_intlike(a) && is_intlike(b)) {
        if (b.to_int() == 0) throw_type_error("integer division or modulo by zero");
        return Value::integer(floor_div(a.to_int(), b.to_int()));
      }
      if (a.is_number() && b.is_number()) {
        if (b.to_double() == 0.0) throw_type_error("float floor division by zero");
        return Value::number(std::floor(a.to_double() / b.to_double()));
      }
      break;
    case BinaryOp::Mod:
      if (is_intlike(a) && is_intlike(b)) {
        if (b.to_int() == 0) throw_type_error("integer division or modulo by zero");
        return Value::integer(py_mod(a.to_int(), b.to_int()));
      }
      if (a.is_number() && b.is_number()) {
        if (b.to_double() == 0.0) throw_type_error("float modulo");
        return Value::number(py_fmod(a.to_double(), b.to_double()));
      }
      if (a.is_string()) throw_unsupported("printf-style string formatting ('...' % values)");
      break;
    case BinaryOp::Pow:
      if (is_intlike(a) && is_intlike(b)) {
        const std::int64_t base = a.to_int();
        const std::int64_t exp = b.to_int();
        if (exp < 0) return Value::number(std::pow(static_cast<double>(base), static_cast<double>(exp)));
        std::int64_t result = 1;
        for (std::int64_t i = 0; i < exp; ++i) {
          if (__builtin_mul_overflow(result, base, &result)) overflow();
          if (result == 0 || result == 1) break;
        }
        return Value::integer(result);
      }
      if (a.is_number() && b.is_number()) return Value::number(std::pow(a.to_double(), b.to_double()));
      break;
    default: break;
  }
  unsupported_operands(op, a, b);
}

Value negate(const Value& v) {
  if (v.is_undefined()) v.fail_undefined();
  if (is_intlike(v)) {
    if (v.to_int() == std::numeric_limits<std::int64_t>::min()) overflow();
    return Value::integer(-v.to_int());
  }
  if (v.is_float()) return Value::number(-v.as_float());
  throw_type_error("bad operand type for unary -: '" + type_name(v) + "'");
}

Value unary_plus(const Value& v) {
  if (v.is_undefined()) v.fail_undefined();
  if (is_intlike(v)) return Value::integer(v.to_int());
  if (v.is_float()) return v;
  throw_type_error("bad operand type for unary +: '" + type_name(v) + "'");
}

int order(const Value& a, const Value& b) {
  if (a.is_undefined()) a.fail_undefined();
  if (b.is_undefined()) b.fail_undefined();
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) {
      const double x = a.to_double();
      const double y = b.to_double();
      return x < y ? -1 : (x > y ? 1 : 0);
    }
    const std::int64_t x = a.to_int();
    const std::int64_t y = b.to_int();
    return x < y ? -1 : (x > y ? 1 : 0);
  }
  if (a.is_string() && b.is_string()) {
    // UTF-8 byte order equals code point order, which is how Python compares str.
    const int c = a.as_string().compare(b.as_string());
    return c < 0 ? -1 : (c > 0 ? 1 : 0);
  }
  if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple()) {
    const auto& x = a.items();
    const auto& y = b.items();
    for (std::size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (equals(x[i], y[i])) continue;
      return order(x[i], y[i]);
    }
    return x.size() < y.size() ? -1 : (x.size() > y.size() ? 1 : 0);
  }
  throw_type_error("'<' not supported between instances of '" + type_name(a) + "' and '" + type_name(b) + "'");
}

bool compare(CompareOp op, const Value& a, const Value& b) {
  switch (op) {
    case CompareOp::Eq: return equals(a, b);
    case CompareOp::Ne: return !equals(a, b);
    case CompareOp::Lt: return order(a, b) < 0;
    case CompareOp::Le: return order(a, b) <= 0;
    case CompareOp::Gt: return order(a, b) > 0;
    case CompareOp::Ge: return order(a, b) >= 0;
    case CompareOp::In: return contains(b, a);
    case CompareOp::NotIn: return !contains(b, a);
  }
  return false;
}

bool contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Value::Kind::Undefined: return false;  // jinja2.Undefined iterates as empty
    case Value::Kind::String:
      if (!item.is_string()) {
        if (item.is_undefined()) item.fail_undefined();
        throw_type_error("'in <string>' requires string as left operand, not " + type_name(item));
      }
      return container.as_string().find(item.as_string()) != std::string::npos;
    case Value::Kind::List:
      for (const Value& v : container.items()) {
        if (equals(v, item)) return true;
      }
      return false;
    case Value::Kind::Dict:
      if (item.is_list() && !item.is_tuple()) throw_type_error("unhashable type: 'list'");
      if (item.is_dict()) throw_type_error("unhashable type: 'dict'");
      return container.as_dict().find(item) != nullptr;
    default: throw_type_error("argument of type '" + type_name(container) + "' is not iterable");
  }
}

}  // namespace qwenrt::text::jinja
