#pragma once
// Elementwise and per-row ops of the CPU backend, f32 in and out.
#include <cmath>
#include <cstdint>

namespace qwenrt::cpu {

// y = x · rsqrt(mean(x²) + eps) · w, over n elements (w already holds (1 + w) where the norm is
// zero-centred).
void rms_norm(const float* x, const float* w, float* y, int64_t n, float eps);

// x ← x · rsqrt(Σx² + eps) · scale (the DeltaNet q/k normalisation).
void l2_normalize(float* x, int64_t n, float eps, float scale);

// Rotate-half RoPE on the first `rotary_dim` entries of one head; pairs (d, d + rotary_dim/2).
void rope_rotate_half(float* x, const float* cos, const float* sin, int64_t rotary_dim);

inline float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
inline float silu(float x) { return x / (1.0f + std::exp(-x)); }
// PyTorch's softplus (beta 1, threshold 20: linear above).
inline float softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

}  // namespace qwenrt::cpu
