#include "model/non_finite.h"

#include <string>

#include "core/error.h"

namespace qwenrt {

void fail_non_finite(const ModelConfig& config, const RowLayout& layout, int layer, const char* what, int64_t step_row) {
  int slot = -1;
  int64_t position = -1;
  for (const auto& sp : layout.spans)
    if (step_row >= sp.first_row && step_row < sp.first_row + sp.rows) slot = sp.slot, position = sp.start_position + step_row - sp.first_row;
  const std::string where =
      layer >= 0 && layer < static_cast<int>(config.layer_types.size())
          ? "layer " + std::to_string(layer) + " (" +
                (config.layer_types[static_cast<std::size_t>(layer)] == LayerKind::FullAttention ? "gated attention" : "Gated DeltaNet") + ")"
          : std::string(what);
  fail("the forward pass produced non-finite values in ", where, " (", what, ", sequence slot ", slot, ", position ", position,
       "); the checkpoint may hold NaN or Inf weights: `qwenrt info --check` scans them");
}

}  // namespace qwenrt
