#pragma once
// The one order in which every CPU sum over 8 lane partial sums (lane l holding the terms
// l, l + 8, l + 16, ... in order) is reduced: ((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7)). The row
// kernels' hsum8 does the same on a register; kernels that must give their bits (the blocked
// product, attention, the delta rule) reduce stored lanes with this.
namespace qwenrt::cpu {

inline float reduce_lanes(const float* l) { return ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7])); }

}  // namespace qwenrt::cpu
