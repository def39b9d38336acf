#pragma once
// y = x · Wᵀ for f32 activations and bf16/f16/f32 weights, f32 accumulation.
//
// Each weight row is streamed once per call for the whole batch of x rows (decode is bandwidth
// bound). Every (x row, weight row) dot product is accumulated in the same order whatever the
// batch size or tiling, so a row's result does not depend on what else is in the batch.
#include <cstdint>
#include <span>

#include "backend/weight.h"
#include "core/thread_pool.h"

namespace qwenrt::cpu {

struct MatmulOutput {
  Weight w;
  float* y;  // [n, ldy]; columns [0, w.rows) are written
  int64_t ldy;
};

// x: [n, k] with row stride k; each output's weight must have cols == k. All outputs share one
// pass over the thread pool (one barrier for, e.g., the four projections of a DeltaNet layer).
void matmul_multi(const float* x, int64_t n, int64_t k, std::span<const MatmulOutput> outputs, ThreadPool& pool);

inline void matmul(const float* x, int64_t n, const Weight& w, float* y, ThreadPool& pool) {
  MatmulOutput out{w, y, w.rows};
  matmul_multi(x, n, w.cols, {&out, 1}, pool);
}

// Which instruction set the kernels run with on this machine ("avx2" or "scalar").
const char* matmul_isa();

}  // namespace qwenrt::cpu
