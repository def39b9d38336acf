#pragma once
// Greedy picks on the GPU: the argmax of each row of logits, so the logits stay on the device.
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "backend/cuda/ptx/non_finite_probe.h"

namespace qwenrt::cuda {

// out[r] = the column of row r's largest value, the first of equal ones (as std::max_element);
// NaN counts as −∞. Greedy decoding picks its tokens here instead of moving the logits to the host.
// With a workspace of argmax_workspace_bytes(rows, width), rows as wide as a vocabulary are
// scanned by many blocks at once (one block streams ~1 MB in 16 us); without, one block per row.
std::size_t argmax_workspace_bytes(int64_t rows, int64_t width);
// `mirror`, when given, receives the same picks (mapped host memory: no copy back needed).
//
// With `health.mirror`, row r's health goes there beside the picks: the step's health word as the
// norms before left it (non_finite_probe.h), lowered to (head_site << 32 | r) when the row holds a
// non-finite value, so a greedy step that went wrong says so instead of picking column 0.
struct ArgmaxHealth {
  const unsigned long long* step_word = nullptr;
  uint32_t head_site = 0;
  unsigned long long* mirror = nullptr;  // [rows]
};
void argmax_rows(const float* x, int64_t ldx, int64_t rows, int64_t width, int32_t* out, cudaStream_t stream, void* workspace = nullptr,
                 std::size_t workspace_bytes = 0, int32_t* mirror = nullptr, const ArgmaxHealth& health = {});

}  // namespace qwenrt::cuda
