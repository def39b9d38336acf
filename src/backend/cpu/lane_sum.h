#pragma once
// The one order in which every CPU sum over 8 lane partial sums (lane l holding the terms
// l, l + 8, l + 16, ... in order) is reduced: ((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7)). The row
// kernels reduce a register with hsum8; kernels that must give their bits (the blocked product,
// attention, the delta rule, the scalar twins) reduce stored lanes with reduce_lanes.
#include <immintrin.h>

namespace qwenrt::cpu {

inline float reduce_lanes(const float* l) { return ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7])); }

__attribute__((target("avx2,fma,f16c"))) inline float hsum8(__m256 v) {
  const __m128 a = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));  // l + l4
  const __m128 b = _mm_add_ps(a, _mm_movehl_ps(a, a));                                  // + (l2 + l6)
  return _mm_cvtss_f32(_mm_add_ss(b, _mm_shuffle_ps(b, b, 1)));
}

}  // namespace qwenrt::cpu
