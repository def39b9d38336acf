#pragma once
// The CPU reference the DeltaNet kernel tests compare with: a random layer and one row through the
// CPU layer's decode arithmetic.
#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "backend/cpu/ops.h"
#include "backend/cuda/deltanet/deltanet_decode.h"
#include "backend/cuda/gpu_test_support.h"
#include "model/cpu/deltanet.h"

namespace qwenrt::test {

constexpr int kD = cuda::kDeltaNetDecodeHeadDim, kK = cuda::kDeltaNetDecodeConvKernel;

struct DeltaNetLayer {
  int nk = 0, nv = 0;
  int64_t key_dim = 0, value_dim = 0, conv_dim = 0;
  std::vector<float> conv_w, neg_exp_a, dt_bias, norm_w;
  float eps = 1e-6f;
};

// weak_decay: gates near 1 (as trained models have), so the state carries over many rows.
inline DeltaNetLayer random_deltanet_layer(int nk, int nv, std::mt19937& rng, bool weak_decay = false) {
  DeltaNetLayer L;
  L.nk = nk;
  L.nv = nv;
  L.key_dim = int64_t{nk} * kD;
  L.value_dim = int64_t{nv} * kD;
  L.conv_dim = 2 * L.key_dim + L.value_dim;
  L.conv_w = test::random_f32(static_cast<std::size_t>(L.conv_dim * kK), rng, 0.5f);
  L.neg_exp_a = test::random_f32(static_cast<std::size_t>(nv), rng, 0.5f);
  for (float& v : L.neg_exp_a) v = -std::exp(v) * (weak_decay ? 0.02f : 1.0f);
  L.dt_bias = test::random_f32(static_cast<std::size_t>(nv), rng);
  L.norm_w = test::random_f32(kD, rng, 0.2f);
  for (float& v : L.norm_w) v += 1.0f;
  return L;
}

// One row through the CPU layer's decode arithmetic (model/deltanet.cpp, steps 2-5 before the out
// projection). ring: this slot's K × conv_dim ring, S: its [nv, dk, dv] state, both updated; out:
// [value_dim] before the bf16 rounding.
inline void deltanet_reference_row(const DeltaNetLayer& L, const float* qkv, const float* z, const float* b, const float* a, int64_t pos, float* ring,
                                   float* S, std::vector<float>& out) {
  // Causal conv over the rows of positions pos−K+1..pos (negative ones are zeros), then SiLU.
  std::vector<float> mixed(static_cast<std::size_t>(L.conv_dim));
  for (int64_t ch = 0; ch < L.conv_dim; ++ch) {
    float s = 0;
    for (int j = 0; j < kK; ++j) {
      const int64_t pj = pos - (kK - 1) + j;
      const float h = j == kK - 1 ? qkv[ch] : pj < 0 ? 0.0f : ring[(pj % kK) * L.conv_dim + ch];
      s += L.conv_w[ch * kK + j] * h;
    }
    mixed[ch] = cpu::silu(s);
  }
  std::copy(qkv, qkv + L.conv_dim, ring + (pos % kK) * L.conv_dim);

  const float q_scale = 1.0f / std::sqrt(static_cast<float>(kD));
  for (int hk = 0; hk < L.nk; ++hk) {
    cpu::l2_normalize(&mixed[hk * kD], kD, 1e-6f, q_scale);
    cpu::l2_normalize(&mixed[L.key_dim + hk * kD], kD, 1e-6f, 1.0f);
  }
  out.assign(static_cast<std::size_t>(L.value_dim), 0.0f);
  const int ratio = L.nv / L.nk;
  for (int hv = 0; hv < L.nv; ++hv) {
    const int hk = hv / ratio;
    const float beta = cpu::sigmoid(b[hv]);
    const float g = L.neg_exp_a[hv] * cpu::softplus(a[hv] + L.dt_bias[hv]);
    float* o = &out[hv * kD];
    const DeltaRuleHead head{&mixed[hk * kD], &mixed[L.key_dim + hk * kD], &mixed[2 * L.key_dim + hv * kD], &beta, &g, o, 0, 0, 0, 0, 0};
    delta_rule_recurrent(head, 1, kD, kD, S + int64_t{hv} * kD * kD);
    cpu::rms_norm(o, L.norm_w.data(), o, kD, L.eps);
    for (int j = 0; j < kD; ++j) o[j] *= cpu::silu(z[hv * kD + j]);
  }
}

// The layer's weights on the device, and the part of the kernels' arguments they fill (weights, eps,
// head counts and dims); the caller sets the inputs, caches and output.
struct DeltaNetDeviceLayer {
  cuda::DeviceBuffer conv_w, neg_exp_a, dt_bias, norm_w;
  explicit DeltaNetDeviceLayer(const DeltaNetLayer& L)
      : conv_w(to_device(L.conv_w)), neg_exp_a(to_device(L.neg_exp_a)), dt_bias(to_device(L.dt_bias)), norm_w(to_device(L.norm_w)) {}
  cuda::DeltaNetDecodeArgs args(const DeltaNetLayer& L) const {
    cuda::DeltaNetDecodeArgs a;
    a.conv_w = conv_w.as<float>();
    a.neg_exp_a = neg_exp_a.as<float>();
    a.dt_bias = dt_bias.as<float>();
    a.norm_w = norm_w.as<float>();
    a.eps = L.eps;
    a.nk = L.nk;
    a.nv = L.nv;
    a.dk = a.dv = kD;
    a.K = kK;
    return a;
  }
};

}  // namespace qwenrt::test
