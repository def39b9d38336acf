// Case 8: the MoE kernels (backend/cuda/moe, emulated) on small versions of the GPU test's shapes
// (tests/backend/cuda/moe/moe_test.cpp) against a double reference: routing against the CPU's,
// the grouped window path and the decode launches against the layer's output, decode rows alone
// vs batched bit for bit, the window path twice (its grouping order changes with the warp
// schedule; the bits must not).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <random>
#include <vector>

#include "backend/cuda/moe/moe.h"
#include "check_support.h"

namespace {

using qwenrt::cuda::MoeExperts;

uint16_t to_bf(float f) { return emu_f2bf(f); }
float from_bf(uint16_t b) { return emu_bf2f(b); }

int run_case(int E, int k, bool shared, int64_t H, int64_t I, int64_t rows, unsigned seed) {
  std::mt19937 rng(seed);
  const int groups = E + (shared ? 1 : 0), S = k + (shared ? 1 : 0);
  auto gu = random_bf16(static_cast<std::size_t>(groups * 2 * I * H), rng, 1.0f / std::sqrt(static_cast<float>(H)));
  auto dn = random_bf16(static_cast<std::size_t>(groups * H * I), rng, 1.0f / std::sqrt(static_cast<float>(I)));
  auto xb = random_bf16(static_cast<std::size_t>(rows * H), rng, 1.0f);
  MoeExperts ex;
  ex.gate_up = reinterpret_cast<const __nv_bfloat16*>(gu.data());
  ex.down = reinterpret_cast<const __nv_bfloat16*>(dn.data());
  ex.experts = E;
  ex.top_k = k;
  ex.shared = shared;
  ex.hidden = H;
  ex.inter = I;
  ex.slots = S;
  const int64_t ld = groups + 3;
  std::normal_distribution<float> nd(0.0f, 2.0f);
  std::vector<float> logits(static_cast<std::size_t>(rows * ld));
  for (auto& v : logits) v = nd(rng);
  std::vector<int32_t> ids(static_cast<std::size_t>(rows * S));
  std::vector<float> w(ids.size());
  qwenrt::cuda::moe_route(logits.data(), ld, rows, ex, ids.data(), w.data(), nullptr);
  int bad = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const float* l = &logits[static_cast<std::size_t>(r * ld)];
    std::vector<double> p(static_cast<std::size_t>(E));
    const double mx = *std::max_element(l, l + E);
    for (int e = 0; e < E; ++e) p[static_cast<std::size_t>(e)] = std::exp(l[e] - mx);
    std::vector<int> order(static_cast<std::size_t>(E));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return p[static_cast<std::size_t>(a)] > p[static_cast<std::size_t>(b)]; });
    double top = 0;
    for (int j = 0; j < k; ++j) top += p[static_cast<std::size_t>(order[static_cast<std::size_t>(j)])];
    for (int j = 0; j < k; ++j) {
      const std::size_t at = static_cast<std::size_t>(r * S + j);
      bad += ids[at] != order[static_cast<std::size_t>(j)] ||
             std::fabs(w[at] - p[static_cast<std::size_t>(order[static_cast<std::size_t>(j)])] / top) > 1e-6;
    }
    if (shared)
      bad +=
          ids[static_cast<std::size_t>(r * S + k)] != E || std::fabs(w[static_cast<std::size_t>(r * S + k)] - 1.0 / (1.0 + std::exp(-l[E]))) > 1e-6;
  }

  // Reference from the routed slots.
  std::vector<double> ref(static_cast<std::size_t>(rows * H), 0.0), act(static_cast<std::size_t>(I));
  for (int64_t r = 0; r < rows; ++r)
    for (int s = 0; s < S; ++s) {
      const int64_t e = ids[static_cast<std::size_t>(r * S + s)];
      for (int64_t i = 0; i < I; ++i) {
        double g = 0, u = 0;
        for (int64_t d = 0; d < H; ++d) {
          const double x = from_bf(xb[static_cast<std::size_t>(r * H + d)]);
          g += x * from_bf(gu[static_cast<std::size_t>((e * 2 * I + i) * H + d)]);
          u += x * from_bf(gu[static_cast<std::size_t>((e * 2 * I + I + i) * H + d)]);
        }
        act[static_cast<std::size_t>(i)] = from_bf(to_bf(static_cast<float>(g / (1.0 + std::exp(-g)) * u)));
      }
      for (int64_t d = 0; d < H; ++d) {
        double acc = 0;
        for (int64_t i = 0; i < I; ++i) acc += act[static_cast<std::size_t>(i)] * from_bf(dn[static_cast<std::size_t>((e * H + d) * I + i)]);
        ref[static_cast<std::size_t>(r * H + d)] += w[static_cast<std::size_t>(r * S + s)] * acc;
      }
    }

  std::vector<unsigned char> scratch(qwenrt::cuda::moe_window_scratch_bytes(rows, ex) + 16);
  void* sp = reinterpret_cast<void*>((reinterpret_cast<uintptr_t>(scratch.data()) + 15) & ~uintptr_t{15});
  std::fill(scratch.begin(), scratch.end(), 0xff);
  std::vector<float> y(static_cast<std::size_t>(rows * H), 1.0f);
  qwenrt::cuda::moe_window(reinterpret_cast<const __nv_bfloat16*>(xb.data()), H, rows, ex, ids.data(), w.data(), sp, y.data(), H, true, nullptr);
  for (auto& v : y) v -= 1.0f;
  const double werr = rel_l2(y, ref);
  std::vector<float> y2(y.size());
  qwenrt::cuda::moe_window(reinterpret_cast<const __nv_bfloat16*>(xb.data()), H, rows, ex, ids.data(), w.data(), sp, y2.data(), H, false, nullptr);
  std::vector<float> y3(y.size());
  emu::g_seed += 17;  // another warp schedule
  qwenrt::cuda::moe_window(reinterpret_cast<const __nv_bfloat16*>(xb.data()), H, rows, ex, ids.data(), w.data(), sp, y3.data(), H, false, nullptr);
  const double werr2 = rel_l2(y2, ref);

  const int64_t n = std::min<int64_t>(rows, qwenrt::cuda::kMoeDecodeRows);
  std::vector<uint16_t> dact(qwenrt::cuda::moe_decode_act_bytes(n, ex) / 2);
  std::vector<float> yd(static_cast<std::size_t>(n * H));
  qwenrt::cuda::moe_decode(reinterpret_cast<const __nv_bfloat16*>(xb.data()), H, n, ex, ids.data(), w.data(),
                           reinterpret_cast<__nv_bfloat16*>(dact.data()), yd.data(), H, false, nullptr);
  const double derr = rel_l2(yd, std::vector<double>(ref.begin(), ref.begin() + n * H));
  bool alone_same = true;
  for (int64_t r = 0; r < n; ++r) {
    std::vector<float> one(static_cast<std::size_t>(H));
    qwenrt::cuda::moe_decode(reinterpret_cast<const __nv_bfloat16*>(xb.data()) + r * H, H, 1, ex, ids.data() + r * S, w.data() + r * S,
                             reinterpret_cast<__nv_bfloat16*>(dact.data()), one.data(), H, false, nullptr);
    alone_same &= std::equal(one.begin(), one.end(), yd.begin() + r * H);
  }
  const bool ok = bad == 0 && werr < 1e-4 && werr2 < 1e-4 && y2 == y3 && derr < 1e-4 && alone_same;
  std::printf("  moe E%d k%d%s H%lld I%lld rows %lld: route mismatches %d, window %.2e (again %.2e, %s), decode %.2e, alone %s: %s\n", E, k,
              shared ? " shared" : "", static_cast<long long>(H), static_cast<long long>(I), static_cast<long long>(rows), bad, werr, werr2,
              y2 == y3 ? "same bits" : "DIFFERENT BITS", derr, alone_same ? "same bits" : "DIFFERENT", ok ? "ok" : "FAIL");
  return ok ? 0 : 1;
}

}  // namespace

int moe_check() {
  int failures = 0;
  failures += run_case(64, 8, true, 64, 16, 40, 31);
  failures += run_case(16, 4, false, 128, 40, 160, 32);  // 64-row tiles (the others: 32)
  failures += run_case(512, 10, true, 64, 24, 9, 33);
  failures += run_case(4, 2, true, 64, 40, 300, 34);  // 128-row tiles: 150 rows per routed expert
  return failures;
}
