#include "model/cuda/health_site.h"

#include "backend/cuda/ptx/non_finite_probe.h"
#include "core/error.h"
#include "model/non_finite.h"

namespace qwenrt {

void check_step_health(unsigned long long word, const ModelConfig& c, const RowLayout& lay) {
  if (word == cuda::kStepHealthy) return;
  const uint32_t site = static_cast<uint32_t>(word >> 32);
  const int64_t row = static_cast<int64_t>(word & 0xffffffffu);
  if (site == head_site(c)) {
    if (row >= static_cast<int64_t>(lay.logit_rows.size())) fail("internal: a head health report for wanted row ", row);
    fail_non_finite(c, lay, -1, "head", lay.logit_rows[static_cast<std::size_t>(row)]);
  }
  if (site > head_site(c)) fail("internal: a health report from site ", site);
  const int layer = static_cast<int>(site / 2);
  if (site == final_norm_site(c)) fail_non_finite(c, lay, layer - 1, "residual stream", row);
  if (site % 2 == 1) fail_non_finite(c, lay, layer, "residual stream", row);  // its mixer's output
  if (layer == 0) fail_non_finite(c, lay, -1, "embedding", row);
  fail_non_finite(c, lay, layer - 1, "residual stream", row);  // the layer before's MLP
}

}  // namespace qwenrt
