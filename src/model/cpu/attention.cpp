#include "model/cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/ops.h"
#include "backend/cpu/vector_ops.h"

namespace qwenrt {

void rope_angles(int64_t position, int64_t rotary_dim, double theta, float* cos, float* sin) {
  const float base = static_cast<float>(theta), pos = static_cast<float>(position);
  for (int64_t d = 0; d < rotary_dim / 2; ++d) {
    const float inv_freq = 1.0f / std::pow(base, static_cast<float>(2 * d) / static_cast<float>(rotary_dim));
    const float angle = inv_freq * pos;
    cos[d] = std::cos(angle);
    sin[d] = std::sin(angle);
  }
}

void attention_mix(const BlockContext& ctx, const AttentionWeights& w, int attn_layer, float* qg, float* k, const float* v, float* attn) {
  const ModelConfig& c = ctx.config;
  const int64_t T = ctx.layout.total_rows;
  const int64_t Nq = c.num_heads, Nkv = c.num_kv_heads, Dh = c.head_dim, R = c.rotary_dim;
  const float eps = static_cast<float>(c.rms_norm_eps);

  // Per row: normalise q and k heads, rotate, and write k/v into the cache at the row's position.
  std::vector<int> row_slot(static_cast<std::size_t>(T));
  for (const auto& sp : ctx.layout.spans)
    for (int64_t r = 0; r < sp.rows; ++r) row_slot[static_cast<std::size_t>(sp.first_row + r)] = sp.slot;
  ctx.pool.parallel_for(static_cast<std::size_t>(T), 1, [&](std::size_t r0, std::size_t r1) {
    std::vector<float> cs(static_cast<std::size_t>(R / 2)), sn(static_cast<std::size_t>(R / 2));
    for (std::size_t r = r0; r < r1; ++r) {
      const int64_t pos = ctx.layout.positions[r];
      rope_angles(pos, R, c.rope_theta, cs.data(), sn.data());
      for (int64_t h = 0; h < Nq; ++h) {
        float* q = qg + (r * Nq + h) * 2 * Dh;  // query half; the gate half follows it
        cpu::rms_norm(q, w.q_norm.data(), q, Dh, eps);
        cpu::rope_rotate_half(q, cs.data(), sn.data(), R);
      }
      float* kc = ctx.cache.key(attn_layer, row_slot[r], pos);
      float* vc = ctx.cache.value(attn_layer, row_slot[r], pos);
      for (int64_t h = 0; h < Nkv; ++h) {
        float* kh = k + (r * Nkv + h) * Dh;
        cpu::rms_norm(kh, w.k_norm.data(), kh, Dh, eps);
        cpu::rope_rotate_half(kh, cs.data(), sn.data(), R);
      }
      std::copy_n(k + r * Nkv * Dh, Nkv * Dh, kc);
      std::copy_n(v + r * Nkv * Dh, Nkv * Dh, vc);
    }
  });

  // Causal attention per (row, query head) over the cached rows [0, position].
  const float scale = 1.0f / std::sqrt(static_cast<float>(Dh));
  const int64_t group = Nq / Nkv;
  ctx.pool.parallel_for(static_cast<std::size_t>(T * Nq), 1, [&](std::size_t i0, std::size_t i1) {
    std::vector<float> scores;
    std::vector<const float*> keys, values;  // the cached rows 0..pos (paged: looked up once)
    for (std::size_t i = i0; i < i1; ++i) {
      const std::size_t r = i / static_cast<std::size_t>(Nq);
      const int64_t h = static_cast<int64_t>(i % static_cast<std::size_t>(Nq)), hk = h / group;
      const int64_t pos = ctx.layout.positions[r];
      const int slot = row_slot[r];
      const float* q = qg + (r * Nq + h) * 2 * Dh;
      const auto n = static_cast<std::size_t>(pos + 1);
      scores.resize(n);
      keys.resize(n);
      values.resize(n);
      for (int64_t j = 0; j <= pos; ++j) {
        keys[j] = ctx.cache.key(attn_layer, slot, j);
        values[j] = ctx.cache.value(attn_layer, slot, j);
      }
      cpu::dot_rows(q, keys.data(), hk * Dh, pos + 1, Dh, scores.data());
      float mx = -INFINITY;
      for (int64_t j = 0; j <= pos; ++j) mx = std::max(mx, scores[j] *= scale);
      float sum = 0;
      for (int64_t j = 0; j <= pos; ++j) sum += scores[j] = std::exp(scores[j] - mx);
      for (int64_t j = 0; j <= pos; ++j) scores[j] /= sum;
      float* o = attn + (r * Nq + h) * Dh;
      cpu::weighted_rows(scores.data(), values.data(), hk * Dh, pos + 1, Dh, o);
      const float* gate = q + Dh;
      for (int64_t d = 0; d < Dh; ++d) o[d] *= cpu::sigmoid(gate[d]);
    }
  });
}

}  // namespace qwenrt
