#pragma once
// Products over 4- and 8-bit MLX affine weights with activations rounded to 8-bit integers: the
// opt-in fast mode (`--int8-activations`), as llama.cpp computes every quantized product on x86.
// Off by default: the exact products (matmul_mlx_affine.cpp) are what the 1e-5 parity holds.
//
// Definition (the AVX2 kernel and its scalar twin compute it in the same order, so they agree bit
// for bit; every (x row, weight row) sum is independent of the batch):
//   - each x row is cut into blocks of 32 columns; a block's scale is d = amax / 127 and its
//     values xi = nearbyint(x · (127 / amax)) (zero for an all-zero block), so x̂ = d · xi;
//   - with c0 the middle of the weight's range (8 for 4 bits, 128 for 8 bits), group g of a row
//     contributes s_g · Σ (q − c0) · x̂ + (b_g + c0 · s_g) · Σ x: the bias term sees the exact
//     activations, and centring q keeps the rounding error from adding up along a row.
// The integer sums Σ q · xi are exact (vpmaddubsw / vpmaddwd, no overflow at these widths); only
// the rounding of x departs from the exact product. Accuracy: qwenrt is within ~2e-7 of a float64
// run of this definition (tools/make_int8_references.py); the definition itself moves a model's
// logits about twice as far from the exact ones as a bf16 forward does
// (tests/model/int8_activations_test.cpp, docs/quantization.md).
#include <cstdint>
#include <vector>

#include "backend/weight.h"

namespace qwenrt::cpu {

// The process-wide switch (the CLI sets it from --int8-activations; tests scope it).
void set_int8_activations(bool on);
bool int8_activations();

// Whether products over w take the int8 path when the switch is on: MLX affine, 4 or 8 bits.
bool int8_product_applies(const Weight& w);

namespace mlx_affine {

// n rows of x rounded for matrices of one layout (bits, columns). A row's sum runs in
// 8 float lanes per chunk of columns (64 for 4 bits, 32 for 8 bits; lane l takes the chunk's
// columns l·w .. l·w + w − 1, w = 8 or 4), and per lane this holds what the lane needs of x: the
// int8 values (in the kernel's order: 4 bits, per 64 columns the even columns, then the odd ones,
// the two nibble planes of a 32-byte load; 8 bits, stored order), the scale d of the lane's block,
// Σ x over the lane's columns and (4 bits) 8 · Σ (x − x̂), the centring's correction.
class Int8Activations {
 public:
  struct Layout {
    int bits = 0;                  // the weights' group size does not change how x is rounded: not part of it
    int64_t cols = 0, padded = 0;  // padded: 4 bits, cols rounded up to 64 (zeros past cols)
    int64_t lane_cols() const { return bits == 4 ? 8 : 4; }
    int64_t lanes() const { return padded / lane_cols(); }
    bool operator==(const Layout&) const = default;
  };
  static Layout layout_of(const Weight& w);

  Int8Activations(const float* x, int64_t n, const Layout& layout);
  const Layout& layout() const { return layout_; }
  int64_t rows() const { return n_; }
  const int8_t* values(int64_t i) const { return q_.data() + i * layout_.padded; }
  const float* lane_scales(int64_t i) const { return d_.data() + i * layout_.lanes(); }
  const float* lane_sums(int64_t i) const { return sum_.data() + i * layout_.lanes(); }
  const float* lane_corrections(int64_t i) const { return correction_.data() + i * layout_.lanes(); }

 private:
  Layout layout_;
  int64_t n_;
  std::vector<int8_t> q_;
  std::vector<float> d_, sum_, correction_;
};

}  // namespace mlx_affine

// Rows [r0, r1) of y = x · Wᵀ (y row stride ldy) for every row of `a`, prepared for w's layout:
// AVX2 where the machine has it, else the scalar twin (same bits either way).
void mlx_affine_int8_rows(const mlx_affine::Int8Activations& a, const Weight& w, float* y, int64_t ldy, int64_t r0, int64_t r1);
void mlx_affine_int8_rows_scalar(const mlx_affine::Int8Activations& a, const Weight& w, float* y, int64_t ldy, int64_t r0, int64_t r1);

}  // namespace qwenrt::cpu
