// Python semantics of the binary operators, comparisons and membership tests a template can use.
// Undefined operands raise like jinja2.Undefined does; mismatched types raise Python's TypeError text.
#pragma once

#include "text/jinja/jinja_ast.h"
#include "text/jinja/jinja_value.h"

namespace qwenrt::text::jinja {

Value apply_binary(BinaryOp op, const Value& a, const Value& b);  // arithmetic only (not and/or)
Value negate(const Value& v);
Value unary_plus(const Value& v);
bool compare(CompareOp op, const Value& a, const Value& b);
bool contains(const Value& container, const Value& item);  // `item in container`
// Python ordering used by comparisons and sort filters: <0, 0, >0; TypeError when unorderable.
int order(const Value& a, const Value& b);
// markupsafe.escape() of a plain string.
std::string html_escape(const std::string& s);

}  // namespace qwenrt::text::jinja
