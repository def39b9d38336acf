#pragma once
// Dot products and scaled adds over f32 vectors (attention over the cached rows), AVX2 + FMA where
// the CPU has them and a scalar twin with the same bits elsewhere: the result of a row does not
// depend on the machine's instruction set, nor on what else is in the step.
#include <cstdint>

namespace qwenrt::cpu {

// Σ a[i]·b[i] summed as the row kernels sum: 8 lane sums (lane l over i ≡ l mod 8, fmas in i
// order), reduced ((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7)), then the tail past the last multiple of
// 8 by fmas in order.
float dot(const float* a, const float* b, int64_t n);

// out[r] = dot(a, rows[r] + offset, n) for r in [0, count): each exactly dot's sum, four rows at a
// time so that four sums are in flight (one sum is a chain of dependent fmas).
void dot_rows(const float* a, const float* const* rows, int64_t offset, int64_t count, int64_t n, float* out);

// out[i] = Σ_r w[r]·rows[r][offset + i] for i in [0, n): per element one fma per row in r order,
// starting from 0 (so exactly `out = 0; for r: axpy(w[r], rows[r] + offset, out)`), with the
// sums of a block of columns kept in registers over the rows.
void weighted_rows(const float* w, const float* const* rows, int64_t offset, int64_t count, int64_t n, float* out);

// The forms above on the scalar twin, for the tests.
float dot_scalar(const float* a, const float* b, int64_t n);
void dot_rows_scalar(const float* a, const float* const* rows, int64_t offset, int64_t count, int64_t n, float* out);
void weighted_rows_scalar(const float* w, const float* const* rows, int64_t offset, int64_t count, int64_t n, float* out);

}  // namespace qwenrt::cpu
