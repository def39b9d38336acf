#pragma once
// The configurations of released Qwen 3.5 sizes (../shared/reference/qwen35-model.md §2), for
// random-weight benchmarks that need no download.
#include <string>
#include <vector>

#include "model/config.h"

namespace qwenrt {

// name: 0.8b, 2b, 4b, 9b, 27b, 35b-a3b. Throws Error listing the names for anything else.
ModelConfig released_shape(const std::string& name);
std::vector<std::string> released_shape_names();

}  // namespace qwenrt
