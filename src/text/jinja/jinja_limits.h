// Limits that keep parsing and rendering an untrusted chat template (or request) bounded in stack,
// time and memory. Each exceeded limit is a TemplateError (ErrorKind::Runtime, or Syntax for the
// parser) naming the limit and its value; docs/text.md "## Limits" lists them all.
#pragma once

#include <cstddef>
#include <cstdint>

namespace qwenrt::text::jinja {

// Nesting of the template source: blocks ({% for %}, {% if %}, {% macro %}, ...) plus brackets and
// unary operators inside one expression, counted together. Real chat templates stay below 20.
inline constexpr int kMaxTemplateNesting = 256;
// Nesting of a value: lists and dicts inside one another, including the JSON context (request) a
// template is rendered with. Real requests (tool schemas) stay below 20.
inline constexpr int kMaxValueDepth = 512;
// Statements and expressions being evaluated at once (the evaluator's recursion, macro calls
// included): bounds the stack of a render. Real chat templates stay below 100.
inline constexpr int kMaxEvalNesting = 1500;

// Per-render budget; the defaults are far above what real chat templates need. A server sets them per
// request (ChatTemplate::apply / render take them).
struct RenderLimits {
  std::size_t max_output_bytes = std::size_t{64} << 20;  // the rendered text (and every captured block)
  std::size_t max_string_bytes = std::size_t{64} << 20;  // any single string value
  std::size_t max_list_items = std::size_t{1} << 20;     // any single list, tuple or dict (and a string iterated over)
  std::uint64_t max_loop_iterations = 10'000'000;        // for-loop items, summed over the whole render
  int max_call_depth = 200;                              // nested macro calls and recursive loop() calls
};

// The limits of the render running on this thread (RenderLimits{} outside a render). Installed by
// RenderScope for the duration of a render; nests.
const RenderLimits& active_render_limits();
class RenderScope {
 public:
  explicit RenderScope(const RenderLimits& limits);
  ~RenderScope();
  RenderScope(const RenderScope&) = delete;
  RenderScope& operator=(const RenderScope&) = delete;

 private:
  const RenderLimits* previous_limits_;
  std::uint64_t previous_iterations_;
};

// Throw TemplateError(ErrorKind::Runtime) naming the limit when a value would exceed it. `what`
// names the operation ("string repetition", "center()", ...).
void check_string_bytes(std::size_t bytes, const char* what);
void check_list_items(std::size_t items, const char* what);
void check_output_bytes(std::size_t bytes);
// Charges `items` loop iterations to the render's budget.
void charge_loop_iterations(std::size_t items);

}  // namespace qwenrt::text::jinja
