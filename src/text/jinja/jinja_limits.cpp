// The per-render budget of jinja_limits.h: a thread-local pointer to the running render's limits.
#include "text/jinja/jinja_limits.h"

#include <string>

#include "text/jinja/jinja_error.h"

namespace qwenrt::text::jinja {
namespace {

const RenderLimits kDefaults{};
thread_local const RenderLimits* t_limits = nullptr;
thread_local std::uint64_t t_iterations = 0;

[[noreturn]] void exceeded(const std::string& what, const char* limit, std::uint64_t value, const char* unit) {
  throw TemplateError(ErrorKind::Runtime, what + " exceeds the render limit " + limit + " (" + std::to_string(value) + " " + unit + ")");
}

}  // namespace

const RenderLimits& active_render_limits() { return t_limits ? *t_limits : kDefaults; }

RenderScope::RenderScope(const RenderLimits& limits) : previous_limits_(t_limits), previous_iterations_(t_iterations) {
  t_limits = &limits;
  t_iterations = 0;
}

RenderScope::~RenderScope() {
  t_limits = previous_limits_;
  t_iterations = previous_iterations_;
}

void check_string_bytes(std::size_t bytes, const char* what) {
  const auto& l = active_render_limits();
  if (bytes > l.max_string_bytes) exceeded(std::string("the result of ") + what, "max_string_bytes", l.max_string_bytes, "bytes");
}

void check_list_items(std::size_t items, const char* what) {
  const auto& l = active_render_limits();
  if (items > l.max_list_items) exceeded(std::string("the result of ") + what, "max_list_items", l.max_list_items, "items");
}

void check_output_bytes(std::size_t bytes) {
  const auto& l = active_render_limits();
  if (bytes > l.max_output_bytes) exceeded("the rendered output", "max_output_bytes", l.max_output_bytes, "bytes");
}

void charge_loop_iterations(std::size_t items) {
  const auto& l = active_render_limits();
  t_iterations += items;
  if (t_iterations > l.max_loop_iterations)
    exceeded("the for-loop iterations of this render", "max_loop_iterations", l.max_loop_iterations, "iterations");
}

}  // namespace qwenrt::text::jinja
