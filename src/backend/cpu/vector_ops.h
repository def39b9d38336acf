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

// out[m·ld + j] = dot(queries[m], keys[j] + offset, n) for m in [0, M) and j in [0, count): each
// exactly dot's sum; four queries at a time against each key, so a key is read once for four
// queries and four sums are in flight (one sum is a chain of dependent fmas).
void dot_queries(const float* const* queries, int64_t M, const float* const* keys, int64_t offset, int64_t count, int64_t n, float* out,
                 int64_t ld);

// outs[m][i] = Σ_{j < counts[m]} w[m·ld + j]·rows[j][offset + i] for m in [0, M), i in [0, n):
// per element one fma per row in j order, starting from 0 (exactly `out = 0; for j: out += w·row`
// in fmas, whatever M). Four queries' sums over a block of 16 columns stay in registers while the
// rows stream, so a row block is read once for four queries.
void weighted_rows(const float* w, int64_t ld, const int64_t* counts, int64_t M, const float* const* rows, int64_t offset, int64_t n,
                   float* const* outs);

// The forms above on the scalar twin, for the tests.
float dot_scalar(const float* a, const float* b, int64_t n);
void dot_queries_scalar(const float* const* queries, int64_t M, const float* const* keys, int64_t offset, int64_t count, int64_t n, float* out,
                        int64_t ld);
void weighted_rows_scalar(const float* w, int64_t ld, const int64_t* counts, int64_t M, const float* const* rows, int64_t offset, int64_t n,
                          float* const* outs);

}  // namespace qwenrt::cpu
