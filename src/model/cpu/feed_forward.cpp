#include "model/cpu/feed_forward.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "backend/cpu/matmul.h"
#include "backend/cpu/ops.h"

namespace qwenrt {

void mlp_forward(const MlpWeights& w, const float* x, int64_t rows, float* out, ThreadPool& pool) {
  const int64_t I = w.gate.rows, H = w.gate.cols;
  std::vector<float> gate(static_cast<std::size_t>(rows * I)), up(static_cast<std::size_t>(rows * I));
  const cpu::MatmulOutput outs[] = {{w.gate, gate.data(), I}, {w.up, up.data(), I}};
  cpu::matmul_multi(x, rows, H, outs, pool);
  for (std::size_t i = 0; i < gate.size(); ++i) gate[i] = cpu::silu(gate[i]) * up[i];
  cpu::matmul(gate.data(), rows, w.down, out, pool);
}

void moe_forward(const ModelConfig& c, const MoeWeights& w, const float* x, int64_t rows, float* out, ThreadPool& pool) {
  const int64_t H = c.hidden_size, E = c.num_experts, k = c.experts_per_token;
  std::vector<float> logits(static_cast<std::size_t>(rows * E));
  cpu::matmul(x, rows, w.router, logits.data(), pool);

  // Route: softmax over experts, top-k (ties to the lower index), renormalise.
  std::vector<std::vector<std::pair<int64_t, float>>> routed(static_cast<std::size_t>(E));  // expert → (row, weight)
  std::vector<int64_t> order(static_cast<std::size_t>(E));
  for (int64_t r = 0; r < rows; ++r) {
    float* p = &logits[r * E];
    const float mx = *std::max_element(p, p + E);
    double sum = 0;
    for (int64_t e = 0; e < E; ++e) sum += p[e] = std::exp(p[e] - mx);
    for (int64_t e = 0; e < E; ++e) p[e] = static_cast<float>(p[e] / sum);
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int64_t a, int64_t b) { return p[a] > p[b] || (p[a] == p[b] && a < b); });
    float top = 0;
    for (int64_t j = 0; j < k; ++j) top += p[order[j]];
    for (int64_t j = 0; j < k; ++j) routed[static_cast<std::size_t>(order[j])].emplace_back(r, p[order[j]] / top);
  }

  // Experts in index order, each on its gathered rows; a row's sum thus has a fixed order.
  std::fill(out, out + rows * H, 0.0f);
  std::vector<float> xs, ys;
  for (int64_t e = 0; e < E; ++e) {
    const auto& list = routed[static_cast<std::size_t>(e)];
    if (list.empty()) continue;
    const int64_t n = static_cast<int64_t>(list.size());
    xs.resize(static_cast<std::size_t>(n * H));
    ys.resize(static_cast<std::size_t>(n * H));
    for (int64_t i = 0; i < n; ++i) std::copy_n(x + list[i].first * H, H, &xs[i * H]);
    mlp_forward(w.experts[static_cast<std::size_t>(e)], xs.data(), n, ys.data(), pool);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t d = 0; d < H; ++d) out[list[i].first * H + d] += list[i].second * ys[i * H + d];
  }
  if (w.has_shared) {
    ys.resize(static_cast<std::size_t>(rows * H));
    std::vector<float> gate(static_cast<std::size_t>(rows));
    mlp_forward(w.shared, x, rows, ys.data(), pool);
    cpu::matmul(x, rows, w.shared_gate, gate.data(), pool);
    for (int64_t r = 0; r < rows; ++r) {
      const float g = cpu::sigmoid(gate[r]);
      for (int64_t d = 0; d < H; ++d) out[r * H + d] += g * ys[r * H + d];
    }
  }
}

}  // namespace qwenrt
