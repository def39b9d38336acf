#pragma once
// Where kernels report rows that stopped being finite: a step's health word in device memory,
// reset to kStepHealthy by the step's first kernel and lowered by atomicMin to (site << 32 | row),
// so that it names the first site (the graph's norms in order, then the head) and its first row.
// Only a failing row pays for the atomic; a healthy step does one comparison per norm.
#include <cstdint>

namespace qwenrt::cuda {

constexpr unsigned long long kStepHealthy = ~0ull;

struct NonFiniteProbe {
  unsigned long long* word = nullptr;  // null: not checked
  uint32_t site = 0;
};

#ifdef __CUDACC__
__device__ __forceinline__ void report_non_finite(const NonFiniteProbe& p, int64_t row) {
  if (p.word) atomicMin(p.word, (static_cast<unsigned long long>(p.site) << 32) | static_cast<uint32_t>(row));
}
#endif

}  // namespace qwenrt::cuda
