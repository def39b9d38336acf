#include "backend/cuda/skinny_gemm.h"

#include <gtest/gtest.h>

#include "cuda/gpu_test_support.h"

namespace qwenrt {
namespace {

using test::relative_l2;

// skinny_gemm with the workspace its shapes need.
void gemm(const cuda::DeviceBuffer& x, int64_t n, int64_t k, int64_t ldx, std::span<const cuda::GemmSegment> segs) {
  cuda::DeviceBuffer ws(cuda::skinny_gemm_workspace_bytes(n, k, segs));
  cuda::skinny_gemm(x.as<__nv_bfloat16>(), n, k, ldx, segs, nullptr, ws.get(), ws.bytes());
  QWENRT_CUDA_CHECK(cudaDeviceSynchronize());
}

struct Problem {
  int64_t n, rows, k;
};

// y = x·Wᵀ in double from the bf16 values.
std::vector<double> reference(const std::vector<float>& x, const std::vector<float>& w, int64_t n, int64_t rows, int64_t k) {
  std::vector<double> y(static_cast<std::size_t>(n * rows));
  for (int64_t b = 0; b < n; ++b)
    for (int64_t r = 0; r < rows; ++r) {
      double s = 0;
      for (int64_t i = 0; i < k; ++i) s += static_cast<double>(x[b * k + i]) * w[r * k + i];
      y[b * rows + r] = s;
    }
  return y;
}

TEST(SkinnyGemm, MatchesDoubleReferenceOnOddShapes) {
  QWENRT_REQUIRE_GPU();
  std::mt19937 rng(7);
  // Large enough to run in one pass ({5, 9000, 4096}), and small ones split along K over blocks.
  for (Problem p : {Problem{1, 16, 32}, {1, 17, 8}, {3, 1000, 1032}, {8, 33, 4096}, {9, 250, 520}, {33, 70, 264},
                    {64, 1024, 3584}, {5, 9000, 4096}}) {
    std::vector<float> xf, wf;
    auto xb = test::random_bf16(static_cast<std::size_t>(p.n * p.k), rng, xf);
    auto wb = test::random_bf16(static_cast<std::size_t>(p.rows * p.k), rng, wf);
    auto dx = test::to_device(xb), dw = test::to_device(wb);
    cuda::DeviceBuffer dy(static_cast<std::size_t>(p.n * p.rows) * sizeof(float));
    test::poison(dy);
    const cuda::GemmSegment seg{dw.as<__nv_bfloat16>(), p.rows, dy.as<float>(), p.rows, false};
    gemm(dx, p.n, p.k, p.k, {&seg, 1});
    const double err = relative_l2(test::to_host<float>(dy, static_cast<std::size_t>(p.n * p.rows)), reference(xf, wf, p.n, p.rows, p.k));
    EXPECT_LT(err, 1e-6) << "n " << p.n << " rows " << p.rows << " k " << p.k;
  }
}

// Four weights in one launch, strided outputs, and accumulation into what y held (residual add).
TEST(SkinnyGemm, SegmentsStridesAndAccumulation) {
  QWENRT_REQUIRE_GPU();
  std::mt19937 rng(8);
  const int64_t n = 5, k = 256, ldx = 264, ldy = 300;
  const int64_t rows[4] = {40, 7, 129, 16};
  std::vector<float> xf;
  auto xb = test::random_bf16(static_cast<std::size_t>(n * ldx), rng, xf);
  auto dx = test::to_device(xb);
  std::vector<float> xk(static_cast<std::size_t>(n * k));
  for (int64_t b = 0; b < n; ++b)
    for (int64_t i = 0; i < k; ++i) xk[b * k + i] = xf[b * ldx + i];
  std::vector<cuda::DeviceBuffer> dw, dy;
  std::vector<std::vector<float>> wf(4), y0(4);
  std::vector<cuda::GemmSegment> segs;
  for (int s = 0; s < 4; ++s) {
    dw.push_back(test::to_device(test::random_bf16(static_cast<std::size_t>(rows[s] * k), rng, wf[s])));
    y0[s] = test::random_f32(static_cast<std::size_t>(n * ldy), rng);
    dy.push_back(test::to_device(y0[s]));
    segs.push_back({dw[s].as<__nv_bfloat16>(), rows[s], dy[s].as<float>(), ldy, s % 2 == 1});
  }
  gemm(dx, n, k, ldx, segs);
  for (int s = 0; s < 4; ++s) {
    auto got = test::to_host<float>(dy[s], static_cast<std::size_t>(n * ldy));
    auto ref = reference(xk, wf[s], n, rows[s], k);
    std::vector<float> g;
    std::vector<double> r;
    for (int64_t b = 0; b < n; ++b) {
      for (int64_t c = 0; c < ldy; ++c) {
        const float v = got[b * ldy + c];
        if (c >= rows[s]) {
          EXPECT_EQ(v, y0[s][b * ldy + c]) << "column past the weight's rows was written";
          continue;
        }
        g.push_back(v);
        r.push_back(ref[b * rows[s] + c] + (segs[s].accumulate ? y0[s][b * ldy + c] : 0.0));
      }
    }
    EXPECT_LT(relative_l2(g, r), 1e-6) << "segment " << s;
  }
}

// An activation row's result does not depend on the batch around it (bitwise).
TEST(SkinnyGemm, BatchInvariant) {
  QWENRT_REQUIRE_GPU();
  std::mt19937 rng(9);
  const int64_t rows = 300, k = 1536;
  std::vector<float> xf, wf;
  auto xb = test::random_bf16(static_cast<std::size_t>(64 * k), rng, xf);
  auto dx = test::to_device(xb);
  auto dw = test::to_device(test::random_bf16(static_cast<std::size_t>(rows * k), rng, wf));
  cuda::DeviceBuffer dy(static_cast<std::size_t>(64 * rows) * sizeof(float));
  std::vector<float> alone;
  for (int64_t n : {1, 2, 8, 9, 31, 64}) {
    const cuda::GemmSegment seg{dw.as<__nv_bfloat16>(), rows, dy.as<float>(), rows, false};
    gemm(dx, n, k, k, {&seg, 1});
    auto y = test::to_host<float>(dy, static_cast<std::size_t>(rows));  // row 0's outputs
    if (alone.empty()) alone = y;
    EXPECT_EQ(0, std::memcmp(alone.data(), y.data(), alone.size() * sizeof(float))) << "batch " << n;
  }
}

TEST(SkinnyGemm, RejectsBadShapes) {
  QWENRT_REQUIRE_GPU();
  cuda::DeviceBuffer d(4096);
  const cuda::GemmSegment seg{d.as<__nv_bfloat16>(), 4, d.as<float>(), 4, false};
  EXPECT_THROW(cuda::skinny_gemm(d.as<__nv_bfloat16>(), 0, 64, 64, {&seg, 1}, nullptr), Error);
  EXPECT_THROW(cuda::skinny_gemm(d.as<__nv_bfloat16>(), 65, 64, 64, {&seg, 1}, nullptr), Error);
  EXPECT_THROW(cuda::skinny_gemm(d.as<__nv_bfloat16>(), 1, 60, 64, {&seg, 1}, nullptr), Error);
  // 4 rows over k = 4096 split along K: without a workspace it must refuse, not write anywhere.
  const cuda::GemmSegment big{d.as<__nv_bfloat16>(), 4, d.as<float>(), 4, false};
  ASSERT_GT(cuda::skinny_gemm_workspace_bytes(1, 4096, {&big, 1}), 0u);
  EXPECT_THROW(cuda::skinny_gemm(d.as<__nv_bfloat16>(), 1, 4096, 4096, {&big, 1}, nullptr), Error);
}

}  // namespace
}  // namespace qwenrt
