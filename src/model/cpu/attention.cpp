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

  // Causal attention over the cached rows [0, position] of each row. A work item is a block of up
  // to kRowBlock consecutive rows of one sequence and the query heads of one kv head: each cached
  // key and value row is read once for all of the block's queries. Every query's
  // scores, softmax and weighted sum are the same arithmetic whatever block it is in (a decode row
  // alone gets the bits it gets inside a window).
  const float scale = 1.0f / std::sqrt(static_cast<float>(Dh));
  const int64_t group = Nq / Nkv;
  constexpr int64_t kRowBlock = 4;
  // Too few blocks to keep every thread busy (a decode step): the query heads of a kv head go to
  // items of their own, at the cost of reading its rows once per head.
  int64_t heads_per_item = group;
  int64_t blocks = 0;
  for (const auto& sp : ctx.layout.spans) blocks += (sp.rows + kRowBlock - 1) / kRowBlock * Nkv;
  if (blocks < 2 * ctx.pool.size()) heads_per_item = 1;
  struct Item {
    int64_t first_row, rows, first_head, heads;
    int slot;
  };
  std::vector<Item> items;
  for (const auto& sp : ctx.layout.spans)
    for (int64_t r = 0; r < sp.rows; r += kRowBlock)
      for (int64_t h = 0; h < Nq; h += heads_per_item) items.push_back({sp.first_row + r, std::min(kRowBlock, sp.rows - r), h, heads_per_item, sp.slot});
  ctx.pool.parallel_for(items.size(), 1, [&](std::size_t i0, std::size_t i1) {
    std::vector<float> scores;
    // The cached rows 0..last position of the slot in hand (paged: each looked up once per thread;
    // a thread's items are consecutive, so mostly of one sequence, in growing blocks).
    std::vector<const float*> keys, values, queries;
    int keys_slot = -1;
    std::vector<float*> outs;
    std::vector<int64_t> counts;
    for (std::size_t i = i0; i < i1; ++i) {
      const Item& it = items[i];
      const int64_t last = ctx.layout.positions[it.first_row + it.rows - 1], ld = last + 1, M = it.rows * it.heads;
      const int64_t kv_head = it.first_head / group;
      if (it.slot != keys_slot) keys.clear(), values.clear(), keys_slot = it.slot;
      for (auto j = static_cast<int64_t>(keys.size()); j <= last; ++j) {
        keys.push_back(ctx.cache.key(attn_layer, it.slot, j));
        values.push_back(ctx.cache.value(attn_layer, it.slot, j));
      }
      queries.clear();
      outs.clear();
      counts.clear();
      for (int64_t r = it.first_row; r < it.first_row + it.rows; ++r)
        for (int64_t h = it.first_head; h < it.first_head + it.heads; ++h) {
          queries.push_back(qg + (r * Nq + h) * 2 * Dh);
          outs.push_back(attn + (r * Nq + h) * Dh);
          counts.push_back(ctx.layout.positions[r] + 1);
        }
      scores.resize(static_cast<std::size_t>(M * ld));
      cpu::dot_queries(queries.data(), M, keys.data(), kv_head * Dh, ld, Dh, scores.data(), ld);
      for (int64_t m = 0; m < M; ++m) {
        float* s = &scores[m * ld];
        float mx = -INFINITY;
        for (int64_t j = 0; j < counts[m]; ++j) mx = std::max(mx, s[j] *= scale);
        float sum = 0;
        for (int64_t j = 0; j < counts[m]; ++j) sum += s[j] = std::exp(s[j] - mx);
        for (int64_t j = 0; j < counts[m]; ++j) s[j] /= sum;
      }
      cpu::weighted_rows(scores.data(), ld, counts.data(), M, values.data(), kv_head * Dh, Dh, outs.data());
      for (int64_t m = 0; m < M; ++m) {
        const float* gate = queries[m] + Dh;
        for (int64_t d = 0; d < Dh; ++d) outs[m][d] *= cpu::sigmoid(gate[d]);
      }
    }
  });
}

}  // namespace qwenrt
