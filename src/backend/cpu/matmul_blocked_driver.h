#pragma once
// The format-independent part of the blocked kernels (matmul_blocked.h): loops over weight-row
// blocks, x-row blocks and k-blocks, the register-tile micro-kernels (AVX2 and scalar twin) and
// the final reduction. A format supplies only how to turn a panel of its rows into f32.
#include <cstdint>

#include "backend/weight.h"

namespace qwenrt::cpu::blocked {

// Writes weight rows [r, r + nr) × columns [c0, c0 + kc) as f32 into dst, laid out
// [kc / 8][nr][8] (the nr rows' 8-column slices side by side, in k order). c0 and kc are
// multiples of 8 (and of the group size for quantized formats).
using PackPanel = void (*)(const Weight& w, int64_t r, int nr, int64_t c0, int64_t kc, float* dst);

// Weight element (r, c) as f32, for the columns past the last multiple of 8 (dense and FP8; the
// row kernels fold these in one by one after the lane reduction). nullptr when k % 8 == 0 always.
using LoadElement = float (*)(const Weight& w, int64_t r, int64_t c);

// k-block width: a multiple of every group size (32, 64, 128).
constexpr int64_t kKBlock = 128;

void run(PackPanel pack, LoadElement tail, bool avx2, const float* x, int64_t n, int64_t k, const Weight& w, float* y, int64_t ldy, int64_t r0,
         int64_t r1);

}  // namespace qwenrt::cpu::blocked
