// The exception type of the tokenizer: a qwenrt::Error, so front ends report it like any other
// user-facing failure, but distinguishable when a caller wants to handle tokenizer problems.
#pragma once

#include <string>

#include "core/error.h"

namespace qwenrt::text {

class TokenizerError : public qwenrt::Error {
 public:
  explicit TokenizerError(const std::string& message) : qwenrt::Error(message) {}
};

}  // namespace qwenrt::text
