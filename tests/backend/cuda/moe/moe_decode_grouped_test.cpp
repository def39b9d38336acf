// Packed experts in batches (moe_decode_grouped): grouped by expert, every row the same bits as
// moe_decode gives it eight rows at a time, for 4- and 8-bit affine and FP8 stacks, with experts
// chosen by more pairs than one run holds (the shared expert by every row), run to run although the
// grouping order is not fixed, and with y accumulated or overwritten.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <numeric>
#include <random>
#include <string>

#include "backend/cuda/gpu_test_support.h"
#include "backend/cuda/moe/moe.h"
#include "backend/cuda/quant/quant_test_weights.h"

namespace qwenrt {
namespace {

using cuda::DeviceBuffer;

struct Format {
  const char* name;
  std::function<test::HostQuantWeight(int64_t, int64_t, std::mt19937&)> make;
};

// Expert stacks of E routed experts (+ the shared one), packed on the device row-major.
struct PackedLayer {
  test::HostQuantWeight gate_up, down;
  test::DeviceQuantWeight d_gate_up, d_down;
  cuda::MoeExperts ex;
};

PackedLayer make_layer(const Format& f, int E, int k, int64_t H, int64_t I, std::mt19937& rng) {
  PackedLayer L;
  const int groups = E + 1;
  L.gate_up = f.make(groups * 2 * I, H, rng);
  L.down = f.make(groups * H, I, rng);
  L.d_gate_up = test::upload(L.gate_up.w, false);
  L.d_down = test::upload(L.down.w, false);
  L.ex.experts = E;
  L.ex.top_k = k;
  L.ex.shared = true;
  L.ex.hidden = H;
  L.ex.inter = I;
  L.ex.slots = k + 1;
  L.ex.packed = true;
  L.ex.gate_up_packed = device_quant(L.gate_up.w);
  L.ex.down_packed = device_quant(L.down.w);
  return L;
}

// Each row's top-k distinct experts, drawn mostly from the first few (so some experts get many
// pairs, several runs), then the shared expert; positive weights.
void random_routing(int64_t rows, int E, int k, std::mt19937& rng, std::vector<int32_t>& ids, std::vector<float>& weights) {
  std::uniform_int_distribution<int> any(0, E - 1), popular(0, 5);
  std::bernoulli_distribution pick_popular(0.4);
  std::uniform_real_distribution<float> w(0.05f, 1.0f);
  ids.clear();
  weights.clear();
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<int32_t> chosen;
    while (static_cast<int>(chosen.size()) < k) {
      const int e = pick_popular(rng) ? popular(rng) : any(rng);
      if (std::find(chosen.begin(), chosen.end(), e) == chosen.end()) chosen.push_back(e);
    }
    chosen.push_back(E);
    for (int32_t e : chosen) {
      ids.push_back(e);
      weights.push_back(w(rng));
    }
  }
}

TEST(MoeDecodeGrouped, RowsAreTheBitsOfTheDecodeLaunches) {
  QWENRT_REQUIRE_GPU();
  const std::vector<Format> formats = {
      {"affine4 g64", [](int64_t r, int64_t c, std::mt19937& g) { return test::random_affine(r, c, 4, 64, WeightFormat::BF16, g); }},
      {"affine8 g32 f16", [](int64_t r, int64_t c, std::mt19937& g) { return test::random_affine(r, c, 8, 32, WeightFormat::F16, g); }},
      {"fp8 128x128", [](int64_t r, int64_t c, std::mt19937& g) { return test::random_fp8(r, c, 128, 128, WeightFormat::BF16, g); }},
  };
  const int E = 64, k = 8;
  const int64_t H = 256, I = 128;
  for (const Format& f : formats) {
    std::mt19937 rng(11);
    const PackedLayer L = make_layer(f, E, k, H, I, rng);
    for (const int64_t rows : {9, 40, 64, 130}) {
      const std::string what = std::string(f.name) + ", " + std::to_string(rows) + " rows";
      std::vector<int32_t> ids;
      std::vector<float> weights;
      random_routing(rows, E, k, rng, ids, weights);
      std::vector<float> xf;
      const DeviceBuffer d_x = test::to_device(test::random_bf16(static_cast<std::size_t>(rows * H), rng, xf));
      const DeviceBuffer d_ids = test::to_device(ids), d_w = test::to_device(weights);
      const auto y0 = test::random_f32(static_cast<std::size_t>(rows * H), rng);
      const std::size_t n = y0.size();

      // moe_decode, eight rows a launch.
      DeviceBuffer act(cuda::moe_decode_act_bytes(cuda::kMoeDecodeRows, L.ex));
      auto decode = [&](bool accumulate) {
        DeviceBuffer y = test::to_device(y0);
        for (int64_t r0 = 0; r0 < rows; r0 += cuda::kMoeDecodeRows)
          cuda::moe_decode(d_x.as<__nv_bfloat16>() + r0 * H, H, std::min(cuda::kMoeDecodeRows, rows - r0), L.ex,
                           d_ids.as<int32_t>() + r0 * L.ex.slots, d_w.as<float>() + r0 * L.ex.slots, act.as<__nv_bfloat16>(), y.as<float>() + r0 * H,
                           H, accumulate, nullptr);
        return test::to_host<float>(y, n);
      };
      DeviceBuffer scratch(cuda::moe_decode_grouped_scratch_bytes(rows, L.ex));
      test::poison(scratch);
      auto grouped = [&](bool accumulate) {
        DeviceBuffer y = test::to_device(y0);
        cuda::moe_decode_grouped(d_x.as<__nv_bfloat16>(), H, rows, L.ex, d_ids.as<int32_t>(), d_w.as<float>(), scratch.get(), y.as<float>(), H,
                                 accumulate, nullptr);
        return test::to_host<float>(y, n);
      };
      for (const bool accumulate : {false, true}) {
        const auto want = decode(accumulate);
        const auto got = grouped(accumulate);
        ASSERT_TRUE(std::all_of(want.begin(), want.end(), [](float v) { return std::isfinite(v); })) << what;
        double norm = 0;
        for (std::size_t i = 0; i < n; ++i) norm += static_cast<double>(want[i]) * want[i];
        ASSERT_GT(norm, 0.0) << what;
        std::size_t differ = 0;
        for (std::size_t i = 0; i < n; ++i) differ += std::memcmp(&want[i], &got[i], 4) != 0;
        EXPECT_EQ(differ, 0u) << what << (accumulate ? ", accumulated" : "") << ": " << differ << " of " << n << " values differ from moe_decode's";
        EXPECT_EQ(got, grouped(accumulate)) << what << ": a second run differs";
      }
    }
  }
}

}  // namespace
}  // namespace qwenrt
