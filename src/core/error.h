#pragma once
// One exception type for every user-facing failure: a bad checkpoint, a malformed request, an
// impossible option. The CLI prints what() and exits non-zero; nothing else catches it silently.
#include <stdexcept>
#include <string>

namespace qwenrt {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// Builds a message from pieces: fail("tensor ", name, " has shape ", s).
template <typename... Parts>
[[noreturn]] void fail(const Parts&... parts);

}  // namespace qwenrt

#include <sstream>

namespace qwenrt {
template <typename... Parts>
[[noreturn]] void fail(const Parts&... parts) {
  std::ostringstream out;
  (out << ... << parts);
  throw Error(out.str());
}
}  // namespace qwenrt
