#pragma once
// The order in which every CPU product over MLX affine weights sums a row (the row kernels, the
// blocked prompt kernels and their scalar twins, so all give the same bits): the dense product
// of the dequantized values w = fma(s, q, b) (exactly Weight::row_to_f32's), accumulated in 8
// lanes over *positions* p = 0, 1, ... (lane p % 8) and reduced in the fixed lane order.
//   - 4-bit: within each block of 64 columns (32 bytes), the order in which a byte shuffle takes
//     fields from the two nibble planes, so that a field needs one shuffle and one conversion:
//     p = 8t + l holds column 32·(l / 4) + 2·(4·(t % 4) + l % 4) + t / 4 (steps 0-3 the low
//     nibbles, 4-7 the high ones; lanes 0-3 the block's first 32 columns, lanes 4-7 its last 32).
//     A matrix whose columns end half-way into a block (groups of 32 only) pads it with zero
//     weights and zero x.
//   - other widths: the stored order.
// The x rows in position order are made once per product (Activations).
#include <cstdint>
#include <vector>

#include "backend/weight.h"

namespace qwenrt::cpu::mlx_affine {

struct Positions {
  bool nibble_planes = false;  // 4-bit: nibble-plane order within 64-column blocks
  int64_t cols = 0;            // k
  int64_t padded = 0;          // k rounded up to a whole block (4-bit), else k
  bool operator==(const Positions&) const = default;
};

Positions positions(const Weight& w);

// The column position p holds (>= cols: padding).
inline int64_t column_at(const Positions& P, int64_t p) {
  if (!P.nibble_planes) return p;
  const int64_t o = p % 64, t = o / 8, l = o % 8;
  return p - o + 32 * (l / 4) + 2 * (4 * (t % 4) + l % 4) + t / 4;
}

// n rows of x (row stride cols) in position order (row stride padded). For the stored order the
// rows are x itself, not copied.
class Activations {
 public:
  Activations(const float* x, int64_t n, const Positions& P);
  const Positions& positions() const { return positions_; }
  int64_t rows() const { return n_; }
  const float* data() const { return xp_; }
  const float* row(int64_t i) const { return xp_ + i * positions_.padded; }

 private:
  Positions positions_;
  int64_t n_;
  std::vector<float> copy_;
  const float* xp_;
};

}  // namespace qwenrt::cpu::mlx_affine
