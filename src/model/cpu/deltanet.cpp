#include "model/cpu/deltanet.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/ops.h"
#include "core/error.h"

namespace qwenrt {

void deltanet_mix(const BlockContext& ctx, const DeltaNetWeights& w, int gdn_layer, const float* qkv, const float* z, float* b, float* a, float* o) {
  const ModelConfig& c = ctx.config;
  const int64_t T = ctx.layout.total_rows;
  const int64_t nk = c.linear_num_key_heads, nv = c.linear_num_value_heads;
  const int64_t dk = c.linear_key_head_dim, dv = c.linear_value_head_dim, K = c.linear_conv_kernel;
  const int64_t conv_dim = c.conv_dim(), key_dim = c.key_dim(), value_dim = c.value_dim();

  // 1. Causal depthwise conv over [cached K−1 rows | new rows], then SiLU; the cache keeps the
  //    last K−1 pre-conv rows.
  std::vector<float> mixed(static_cast<std::size_t>(T * conv_dim));
  for (const auto& sp : ctx.layout.spans) {
    float* state = ctx.cache.conv_state(gdn_layer, sp.slot);
    std::vector<float> hist(static_cast<std::size_t>((K - 1 + sp.rows) * conv_dim));
    std::copy(state, state + (K - 1) * conv_dim, hist.begin());
    std::copy(qkv + sp.first_row * conv_dim, qkv + (sp.first_row + sp.rows) * conv_dim, hist.begin() + (K - 1) * conv_dim);
    ctx.pool.parallel_for(static_cast<std::size_t>(conv_dim), 256, [&](std::size_t c0, std::size_t c1) {
      for (int64_t t = 0; t < sp.rows; ++t) {
        float* dst = &mixed[(sp.first_row + t) * conv_dim];
        for (std::size_t ch = c0; ch < c1; ++ch) {
          float s = 0;
          for (int64_t j = 0; j < K; ++j) s += w.conv[ch * K + j] * hist[(t + j) * conv_dim + ch];
          dst[ch] = cpu::silu(s);
        }
      }
    });
    std::copy(hist.end() - (K - 1) * conv_dim, hist.end(), state);
    // Armed for speculation: the conv state after each row t is hist rows t+1 .. t+K−1.
    if (ctx.cache.row_conv_state(gdn_layer, sp.slot, sp.start_position)) {
      if (ctx.layout.phase == Phase::Window) fail("internal: a slot kept for speculation runs a window step (verify in the committed phase)");
      for (int64_t t = 0; t < sp.rows; ++t) {
        float* kept = ctx.cache.row_conv_state(gdn_layer, sp.slot, sp.start_position + t);
        if (!kept) fail("internal: slot ", sp.slot, " keeps fewer rows than its step has (", sp.rows, ")");
        std::copy(hist.begin() + (t + 1) * conv_dim, hist.begin() + (t + K) * conv_dim, kept);
      }
    }
  }

  // 2. Per row: q/k L2 norm (q scaled by dk^-1/2), β = sigmoid(b), g = −exp(A_log)·softplus(a + dt_bias).
  const float q_scale = 1.0f / std::sqrt(static_cast<float>(dk));
  ctx.pool.parallel_for(static_cast<std::size_t>(T), 1, [&](std::size_t r0, std::size_t r1) {
    for (std::size_t r = r0; r < r1; ++r) {
      float* row = &mixed[r * conv_dim];
      for (int64_t hk = 0; hk < nk; ++hk) {
        cpu::l2_normalize(row + hk * dk, dk, 1e-6f, q_scale);
        cpu::l2_normalize(row + key_dim + hk * dk, dk, 1e-6f, 1.0f);
      }
      for (int64_t hv = 0; hv < nv; ++hv) {
        b[r * nv + hv] = cpu::sigmoid(b[r * nv + hv]);
        a[r * nv + hv] = w.neg_exp_a[hv] * cpu::softplus(a[r * nv + hv] + w.dt_bias[hv]);
      }
    }
  });

  // 3. The gated delta rule per (sequence, value head); value head h reads key head h / (nv/nk).
  const int64_t ratio = nv / nk;
  const auto& spans = ctx.layout.spans;
  const bool chunked = ctx.layout.phase == Phase::Window;
  ctx.pool.parallel_for(spans.size() * static_cast<std::size_t>(nv), 1, [&](std::size_t i0, std::size_t i1) {
    for (std::size_t i = i0; i < i1; ++i) {
      const auto& sp = spans[i / static_cast<std::size_t>(nv)];
      const int64_t hv = static_cast<int64_t>(i % static_cast<std::size_t>(nv)), hk = hv / ratio;
      const float* base = &mixed[sp.first_row * conv_dim];
      DeltaRuleHead head{base + hk * dk,
                         base + key_dim + hk * dk,
                         base + 2 * key_dim + hv * dv,
                         &b[sp.first_row * nv + hv],
                         &a[sp.first_row * nv + hv],
                         o + sp.first_row * value_dim + hv * dv,
                         conv_dim,
                         conv_dim,
                         conv_dim,
                         value_dim,
                         nv};
      float* S = ctx.cache.recurrent_state(gdn_layer, sp.slot) + hv * dk * dv;
      if (float* kept = ctx.cache.row_recurrent_state(gdn_layer, sp.slot, sp.start_position)) {
        head.row_states = kept + hv * dk * dv;
        // Rows are [row][layer][floats] apart (the conv pass above checked that every row is kept).
        if (sp.rows > 1) head.row_state_stride = ctx.cache.row_recurrent_state(gdn_layer, sp.slot, sp.start_position + 1) - kept;
      }
      if (chunked) delta_rule_chunked(head, sp.rows, dk, dv, S);
      else delta_rule_recurrent(head, sp.rows, dk, dv, S);
    }
  });

  // 4. Gated RMSNorm per head: rmsnorm(o)·w ⊙ silu(z).
  const float eps = static_cast<float>(c.rms_norm_eps);
  ctx.pool.parallel_for(static_cast<std::size_t>(T * nv), 16, [&](std::size_t i0, std::size_t i1) {
    for (std::size_t i = i0; i < i1; ++i) {
      float* oh = o + i * dv;
      const float* zh = z + i * dv;
      cpu::rms_norm(oh, w.norm.data(), oh, dv, eps);
      for (int64_t j = 0; j < dv; ++j) oh[j] *= cpu::silu(zh[j]);
    }
  });
}

}  // namespace qwenrt
