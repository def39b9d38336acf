// The MoE kernels against a double reference: routing picks the CPU's experts and weights; the
// decode launches and the grouped window path give the layer's output within bf16 rounding of the
// expert activations; decode rows are batch-invariant bit for bit; the window path is
// deterministic although its grouping order is not.
#include "backend/cuda/moe/moe.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "backend/cuda/gpu_test_support.h"
#include "core/half.h"

namespace qwenrt {
namespace {

using cuda::DeviceBuffer;

// A random MoE layer stacked as cuda::MoeExperts reads it (shared expert last, when present).
struct Layer {
  cuda::MoeExperts ex;
  std::vector<float> gate_up, down;  // the bf16 values as floats, stacked
  DeviceBuffer d_gate_up, d_down;
};

Layer make_layer(int E, int k, bool shared, int64_t H, int64_t I, std::mt19937& rng) {
  Layer L;
  const int groups = E + (shared ? 1 : 0);
  const auto gu = test::random_bf16(static_cast<std::size_t>(groups * 2 * I * H), rng, L.gate_up, 1.0f / std::sqrt(static_cast<float>(H)));
  const auto dn = test::random_bf16(static_cast<std::size_t>(groups * H * I), rng, L.down, 1.0f / std::sqrt(static_cast<float>(I)));
  L.d_gate_up = test::to_device(gu);
  L.d_down = test::to_device(dn);
  L.ex.gate_up = L.d_gate_up.as<__nv_bfloat16>();
  L.ex.down = L.d_down.as<__nv_bfloat16>();
  L.ex.experts = E;
  L.ex.top_k = k;
  L.ex.shared = shared;
  L.ex.hidden = H;
  L.ex.inter = I;
  L.ex.slots = k + (shared ? 1 : 0);
  return L;
}

// The layer's output for rows x given each row's (expert, weight) slots, in double; the expert
// activations rounded to bf16 as the kernels round them.
std::vector<double> reference(const Layer& L, const std::vector<float>& x, int64_t rows, const std::vector<int32_t>& ids,
                              const std::vector<float>& w) {
  const int64_t H = L.ex.hidden, I = L.ex.inter;
  const int S = L.ex.slots;
  std::vector<double> y(static_cast<std::size_t>(rows * H), 0.0);
  std::vector<double> act(static_cast<std::size_t>(I));
  for (int64_t r = 0; r < rows; ++r)
    for (int s = 0; s < S; ++s) {
      const int64_t e = ids[static_cast<std::size_t>(r * S + s)];
      const float* g = &L.gate_up[static_cast<std::size_t>(e * 2 * I * H)];
      const float* u = g + I * H;
      for (int64_t i = 0; i < I; ++i) {
        double gs = 0, us = 0;
        for (int64_t d = 0; d < H; ++d) {
          gs += static_cast<double>(x[static_cast<std::size_t>(r * H + d)]) * g[i * H + d];
          us += static_cast<double>(x[static_cast<std::size_t>(r * H + d)]) * u[i * H + d];
        }
        act[static_cast<std::size_t>(i)] = bf16_to_f32(f32_to_bf16(static_cast<float>(test::swiglu(gs, us))));
      }
      const float* dn = &L.down[static_cast<std::size_t>(e * H * I)];
      for (int64_t d = 0; d < H; ++d) {
        double acc = 0;
        for (int64_t i = 0; i < I; ++i) acc += act[static_cast<std::size_t>(i)] * dn[d * I + i];
        y[static_cast<std::size_t>(r * H + d)] += w[static_cast<std::size_t>(r * S + s)] * acc;
      }
    }
  return y;
}

struct Routed {
  std::vector<int32_t> ids;
  std::vector<float> weights;
  DeviceBuffer d_ids, d_weights;
};

// Routes random logits on the GPU and checks the picks against the CPU's routing.
Routed route(const cuda::MoeExperts& ex, int64_t rows, std::mt19937& rng) {
  const int64_t ld = ex.experts + (ex.shared ? 1 : 0) + 3;
  const auto logits = test::random_f32(static_cast<std::size_t>(rows * ld), rng, 2.0f);
  const DeviceBuffer d_logits = test::to_device(logits);
  Routed R;
  R.d_ids = DeviceBuffer(static_cast<std::size_t>(rows * ex.slots) * 4);
  R.d_weights = DeviceBuffer(static_cast<std::size_t>(rows * ex.slots) * 4);
  cuda::moe_route(d_logits.as<float>(), ld, rows, ex, R.d_ids.as<int32_t>(), R.d_weights.as<float>(), nullptr);
  R.ids = test::to_host<int32_t>(R.d_ids, static_cast<std::size_t>(rows * ex.slots));
  R.weights = test::to_host<float>(R.d_weights, static_cast<std::size_t>(rows * ex.slots));
  for (int64_t r = 0; r < rows; ++r) {
    const float* l = &logits[static_cast<std::size_t>(r * ld)];
    std::vector<double> p(static_cast<std::size_t>(ex.experts));
    const double mx = *std::max_element(l, l + ex.experts);
    double sum = 0;
    for (int e = 0; e < ex.experts; ++e) sum += p[static_cast<std::size_t>(e)] = std::exp(l[e] - mx);
    std::vector<int> order(static_cast<std::size_t>(ex.experts));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return p[static_cast<std::size_t>(a)] > p[static_cast<std::size_t>(b)]; });
    double top = 0;
    for (int j = 0; j < ex.top_k; ++j) top += p[static_cast<std::size_t>(order[static_cast<std::size_t>(j)])];
    for (int j = 0; j < ex.top_k; ++j) {
      const std::size_t at = static_cast<std::size_t>(r * ex.slots + j);
      EXPECT_EQ(R.ids[at], order[static_cast<std::size_t>(j)]) << "row " << r << " slot " << j;
      EXPECT_NEAR(R.weights[at], p[static_cast<std::size_t>(order[static_cast<std::size_t>(j)])] / top, 1e-6) << "row " << r << " slot " << j;
    }
    if (ex.shared) {
      const std::size_t at = static_cast<std::size_t>(r * ex.slots + ex.top_k);
      EXPECT_EQ(R.ids[at], ex.experts);
      EXPECT_NEAR(R.weights[at], 1.0 / (1.0 + std::exp(-static_cast<double>(l[ex.experts]))), 1e-6);
    }
  }
  return R;
}

struct Shape {
  int E, k;
  bool shared;
  int64_t H, I, rows;
};

class MoeKernels : public ::testing::TestWithParam<Shape> {
 protected:
  void SetUp() override { QWENRT_REQUIRE_GPU(); }
};

// The released 35B-A3B's routing (256 experts, top 8, shared) on small matrices, the fixture's
// (64 experts, FFN 16), and FFN sizes that leave partial GEMM tiles.
INSTANTIATE_TEST_SUITE_P(Shapes, MoeKernels,
                         ::testing::Values(Shape{64, 8, true, 64, 16, 300}, Shape{256, 8, true, 256, 64, 200}, Shape{128, 4, false, 128, 40, 70},
                                           Shape{512, 10, true, 64, 24, 33},
                                           Shape{8, 2, true, 128, 64, 700}),  // 128-row tiles (prompt windows)
                         [](const auto& info) {
                           const Shape& s = info.param;
                           return "E" + std::to_string(s.E) + "k" + std::to_string(s.k) + (s.shared ? "s" : "") + "H" + std::to_string(s.H) + "I" +
                                  std::to_string(s.I);
                         });

TEST_P(MoeKernels, WindowAndDecodeMatchTheReference) {
  const Shape s = GetParam();
  std::mt19937 rng(7 + s.E + s.k);
  Layer L = make_layer(s.E, s.k, s.shared, s.H, s.I, rng);
  const Routed R = route(L.ex, s.rows, rng);
  std::vector<float> x;
  const auto xb = test::random_bf16(static_cast<std::size_t>(s.rows * s.H), rng, x);
  const DeviceBuffer d_x = test::to_device(xb);
  const auto ref = reference(L, x, s.rows, R.ids, R.weights);

  // The window path over all rows, added to what y holds.
  const auto y0 = test::random_f32(static_cast<std::size_t>(s.rows * s.H), rng);
  DeviceBuffer d_y = test::to_device(y0);
  DeviceBuffer scratch(cuda::moe_window_scratch_bytes(s.rows, L.ex));
  test::poison(scratch);
  cuda::moe_window(d_x.as<__nv_bfloat16>(), s.H, s.rows, L.ex, R.d_ids.as<int32_t>(), R.d_weights.as<float>(), scratch.get(), d_y.as<float>(), s.H,
                   true, nullptr);
  auto window = test::to_host<float>(d_y, static_cast<std::size_t>(s.rows * s.H));
  for (std::size_t i = 0; i < window.size(); ++i) window[i] -= y0[i];
  const double werr = test::relative_l2(window, ref);
  std::printf("[ moe      ] %s window rel_l2 %.3e\n", ::testing::UnitTest::GetInstance()->current_test_info()->name(), werr);
  // The kernels' f32 sums and the reference's double ones round a few activations to neighbouring
  // bf16 values (each ~4e-3 off): ~1e-5 overall; a wrong index or a lost slot is 1e-1 and more.
  EXPECT_LT(werr, 1e-4);

  // Run again: the grouping order differs, the bits do not.
  cuda::moe_window(d_x.as<__nv_bfloat16>(), s.H, s.rows, L.ex, R.d_ids.as<int32_t>(), R.d_weights.as<float>(), scratch.get(), d_y.as<float>(), s.H,
                   false, nullptr);
  const auto once = test::to_host<float>(d_y, window.size());
  cuda::moe_window(d_x.as<__nv_bfloat16>(), s.H, s.rows, L.ex, R.d_ids.as<int32_t>(), R.d_weights.as<float>(), scratch.get(), d_y.as<float>(), s.H,
                   false, nullptr);
  EXPECT_EQ(once, test::to_host<float>(d_y, window.size()));
  EXPECT_LT(test::relative_l2(once, ref), 1e-4);

  // Decode launches on the first rows, eight at a time and each alone: the same bits.
  const int64_t n = std::min<int64_t>(s.rows, cuda::kMoeDecodeRows);
  DeviceBuffer act(cuda::moe_decode_act_bytes(n, L.ex));
  DeviceBuffer d_yd(static_cast<std::size_t>(n * s.H) * 4);
  cuda::moe_decode(d_x.as<__nv_bfloat16>(), s.H, n, L.ex, R.d_ids.as<int32_t>(), R.d_weights.as<float>(), act.as<__nv_bfloat16>(), d_yd.as<float>(),
                   s.H, false, nullptr);
  const auto batched = test::to_host<float>(d_yd, static_cast<std::size_t>(n * s.H));
  const std::vector<double> ref_n(ref.begin(), ref.begin() + n * s.H);
  const double derr = test::relative_l2(batched, ref_n);
  std::printf("[ moe      ] decode rel_l2 %.3e\n", derr);
  EXPECT_LT(derr, 1e-4);
  for (int64_t r = 0; r < n; ++r) {
    DeviceBuffer one(static_cast<std::size_t>(s.H) * 4);
    cuda::moe_decode(d_x.as<__nv_bfloat16>() + r * s.H, s.H, 1, L.ex, R.d_ids.as<int32_t>() + r * L.ex.slots,
                     R.d_weights.as<float>() + r * L.ex.slots, act.as<__nv_bfloat16>(), one.as<float>(), s.H, false, nullptr);
    const auto alone = test::to_host<float>(one, static_cast<std::size_t>(s.H));
    EXPECT_TRUE(std::equal(alone.begin(), alone.end(), batched.begin() + r * s.H)) << "row " << r;
  }
}

}  // namespace
}  // namespace qwenrt
