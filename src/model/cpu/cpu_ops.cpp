#include "model/cpu/cpu_ops.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "backend/cpu/matmul.h"
#include "backend/cpu/ops.h"
#include "core/error.h"
#include "model/cpu/attention.h"
#include "model/cpu/deltanet.h"
#include "model/cpu/feed_forward.h"
#include "model/non_finite.h"

namespace qwenrt {

Act CpuOps::buffer(Part part, int index, int64_t rows, int64_t cols) {
  auto& list = buffers_[static_cast<std::size_t>(part)];
  if (list.size() <= static_cast<std::size_t>(index)) list.resize(static_cast<std::size_t>(index) + 1);
  auto& v = list[static_cast<std::size_t>(index)];
  v.resize(static_cast<std::size_t>(rows * cols));
  return {v.data(), ActType::F32, rows, cols, cols};
}

Act CpuOps::embed() {
  const int64_t T = ctx_.layout.total_rows, H = ctx_.config.hidden_size;
  Act h = buffer(Part::Residual, 0, T, H);
  float* out = h.as<float>();
  int64_t r = 0;
  for (const auto& s : step_.sequences) {
    std::size_t given = 0;
    for (std::size_t i = 0; i < s.tokens.size(); ++i, ++r) {
      if (given < s.embedding_rows.size() && s.embedding_rows[given] == static_cast<int32_t>(i)) {
        std::copy_n(&s.embeddings[given * static_cast<std::size_t>(H)], H, out + r * H);
        ++given;
      } else {
        weights_.embed.row_to_f32(s.tokens[i], out + r * H);
      }
    }
  }
  layer_ = -1;
  require_finite(h, "embedding");
  return h;
}

Act CpuOps::rms_norm(Part part, const Act& x, const ParamVector& w) {
  const int64_t H = x.cols;
  const float eps = static_cast<float>(ctx_.config.rms_norm_eps);
  Act y = buffer(part, 0, x.rows, H);
  ctx_.pool.parallel_for(static_cast<std::size_t>(x.rows), 4, [&](std::size_t r0, std::size_t r1) {
    for (std::size_t r = r0; r < r1; ++r) cpu::rms_norm(x.as<float>() + r * x.ld, w.data(), y.as<float>() + r * H, H, eps);
  });
  return y;
}

std::vector<Act> CpuOps::matmul(Part part, const Act& x, std::initializer_list<const Weight*> weights) {
  if (x.ld != x.cols) fail("internal: CPU products take packed rows");
  std::vector<Act> out;
  std::vector<cpu::MatmulOutput> targets;
  int i = 0;
  for (const Weight* w : weights) {
    out.push_back(buffer(part, i++, x.rows, w->rows));
    targets.push_back({*w, out.back().as<float>(), w->rows});
  }
  cpu::matmul_multi(x.as<float>(), x.rows, x.cols, targets, ctx_.pool);
  if (part == Part::LmHead) {
    layer_ = -1;
    require_finite(out[0], "head");
  }
  return out;
}

void CpuOps::add(Act& h, const Act& y) {
  float* hp = h.as<float>();
  const float* yp = y.as<float>();
  const std::size_t n = static_cast<std::size_t>(h.rows * h.cols);
  for (std::size_t i = 0; i < n; ++i) hp[i] += yp[i];
  require_finite(h, "residual stream");
}

void CpuOps::require_finite(const Act& x, const char* what) const {
  for (int64_t r = 0; r < x.rows; ++r) {
    const float* row = x.as<float>() + r * x.ld;
    bool finite = true;
    for (int64_t c = 0; c < x.cols; ++c) finite &= std::isfinite(row[c]);
    if (finite) continue;
    // Rows of the head are the wanted rows, in order.
    const int64_t step_row = x.rows == ctx_.layout.total_rows ? r : ctx_.layout.logit_rows[static_cast<std::size_t>(r)];
    fail_non_finite(ctx_.config, ctx_.layout, layer_, what, step_row);
  }
}

Act CpuOps::swiglu(const Act& gate, const Act& up) {
  Act y = buffer(Part::SwiGlu, 0, gate.rows, gate.cols);
  const std::size_t n = static_cast<std::size_t>(gate.rows * gate.cols);
  for (std::size_t i = 0; i < n; ++i) y.as<float>()[i] = cpu::silu(gate.as<float>()[i]) * up.as<float>()[i];
  return y;
}

Act CpuOps::gated_deltanet(const DeltaNetWeights& w, int gdn_layer, const Act& qkv, const Act& z, const Act& b, const Act& a) {
  Act o = buffer(Part::DeltaNet, 0, qkv.rows, ctx_.config.value_dim());
  // b and a are this step's own in_proj outputs: turned into β and g in place.
  deltanet_mix(ctx_, w, gdn_layer, qkv.as<float>(), z.as<float>(), b.as<float>(), a.as<float>(), o.as<float>());
  return o;
}

Act CpuOps::gated_attention(const AttentionWeights& w, int attn_layer, const Act& qg, const Act& k, const Act& v) {
  const ModelConfig& c = ctx_.config;
  Act o = buffer(Part::Attention, 0, qg.rows, c.num_heads * c.head_dim);
  // q and k are this step's own projections: normalised and rotated in place.
  attention_mix(ctx_, w, attn_layer, qg.as<float>(), k.as<float>(), v.as<float>(), o.as<float>());
  return o;
}

Act CpuOps::moe(const MoeWeights& w, const Act& x) {
  Act y = buffer(Part::Moe, 0, x.rows, x.cols);
  moe_forward(ctx_.config, w, x.as<float>(), x.rows, y.as<float>(), ctx_.pool);
  return y;
}

Act CpuOps::hidden_rows(const Act& x, const ParamVector& w, const Act& logit_rows) {
  if (!ctx_.layout.hidden_all) return logit_rows;
  const int64_t T = x.rows, H = x.cols;
  const float eps = static_cast<float>(ctx_.config.rms_norm_eps);
  Act y = buffer(Part::HiddenRows, 0, T, H);
  for (int64_t r = 0; r < T; ++r) cpu::rms_norm(x.as<float>() + r * x.ld, w.data(), y.as<float>() + r * H, H, eps);
  return y;
}

Act CpuOps::norm_logit_rows(const Act& x, const ParamVector& w) {
  const auto& rows = ctx_.layout.logit_rows;
  const int64_t H = x.cols;
  const float eps = static_cast<float>(ctx_.config.rms_norm_eps);
  Act y = buffer(Part::FinalNorm, 0, static_cast<int64_t>(rows.size()), H);
  for (std::size_t i = 0; i < rows.size(); ++i) cpu::rms_norm(x.as<float>() + rows[i] * x.ld, w.data(), y.as<float>() + i * H, H, eps);
  return y;
}

}  // namespace qwenrt

namespace qwenrt {

Act CpuOps::given_hidden() {
  const int64_t T = ctx_.layout.total_rows, H = ctx_.config.hidden_size;
  Act h = buffer(Part::MtpHiddenNorm, 1, T, H);  // index 0 is the norm's output
  int64_t r = 0;
  for (const auto& s : step_.sequences) {
    std::copy(s.hidden_in.begin(), s.hidden_in.end(), h.as<float>() + r * H);
    r += static_cast<int64_t>(s.tokens.size());
  }
  return h;
}

Act CpuOps::concat(Part part, const Act& a, const Act& b) {
  Act y = buffer(part, 0, a.rows, a.cols + b.cols);
  for (int64_t r = 0; r < a.rows; ++r) {
    std::copy_n(a.as<float>() + r * a.ld, a.cols, y.as<float>() + r * y.ld);
    std::copy_n(b.as<float>() + r * b.ld, b.cols, y.as<float>() + r * y.ld + a.cols);
  }
  return y;
}

}  // namespace qwenrt
