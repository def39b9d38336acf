#include "backend/cuda/gemm/skinny_gemm.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>

#include "backend/cuda/gpu_test_support.h"
#include "backend/cuda/rows/rms_norm_rows.h"
#include "backend/cuda/rows/swiglu_rows.h"
#include "core/half.h"

namespace qwenrt {
namespace {

using test::relative_l2;

// The K-split scratch: partial sums and the zeroed tile counters, checked to be left zero.
struct Workspace {
  cuda::DeviceBuffer partial, counters{cuda::kSkinnyGemmCounters * sizeof(uint32_t)};
  explicit Workspace(std::size_t bytes) : partial(bytes) { QWENRT_CUDA_CHECK(cudaMemset(counters.get(), 0, counters.bytes())); }
  cuda::SkinnyGemmWorkspace view() const { return {partial.get(), partial.bytes(), counters.as<uint32_t>()}; }
  void expect_counters_zero() const {
    const auto c = test::to_host<uint32_t>(counters, cuda::kSkinnyGemmCounters);
    for (std::size_t i = 0; i < c.size(); ++i) ASSERT_EQ(c[i], 0u) << "tile counter " << i << " left set";
  }
};

// skinny_gemm with the workspace its shapes need.
void gemm(const cuda::DeviceBuffer& x, int64_t n, int64_t k, int64_t ldx, std::span<const cuda::GemmSegment> segs) {
  Workspace ws(cuda::skinny_gemm_workspace_bytes(n, k, segs));
  cuda::skinny_gemm(x.as<__nv_bfloat16>(), n, k, ldx, segs, nullptr, ws.view());
  QWENRT_CUDA_CHECK(cudaDeviceSynchronize());
  ws.expect_counters_zero();
}

struct Problem {
  int64_t n, rows, k;
};

int multiprocessors() {
  int device = 0, sms = 0;
  QWENRT_CUDA_CHECK(cudaGetDevice(&device));
  QWENRT_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  return sms;
}

// y = x·Wᵀ in double from the bf16 values.
std::vector<double> reference(const std::vector<float>& x, const std::vector<float>& w, int64_t n, int64_t rows, int64_t k) {
  return test::matmul_reference(x, k, w, n, rows, k, rows);
}

TEST(SkinnyGemm, MatchesDoubleReferenceOnOddShapes) {
  QWENRT_REQUIRE_GPU();
  std::mt19937 rng(7);
  // Large enough to run in one pass ({5, 9000, 4096}: on an H200, too many blocks for one wave of
  // the overlapping kernel, so its other variant), small ones split along K over blocks, and more
  // row tiles than the GPU holds blocks at once (k 1000 ends in a partial chunk); 27B out_proj (320
  // tiles: streamed unsplit).
  for (Problem p : {Problem{1, 16, 32},
                    {1, 17, 8},
                    {3, 1000, 1032},
                    {8, 33, 4096},
                    {9, 250, 520},
                    {33, 70, 264},
                    {64, 1024, 3584},
                    {5, 9000, 4096},
                    {2, 30000, 1000},
                    {12, 20007, 520},
                    {1, 5120, 6144}}) {
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

// Single weights of about two and six row tiles per multiprocessor: against double, accumulating
// into a strided y, and batch-invariant over 1..8 rows.
TEST(SkinnyGemm, LargeSingleWeightsMatchDoubleAndAreBatchInvariant) {
  QWENRT_REQUIRE_GPU();
  std::mt19937 rng(12);
  const int64_t sms = multiprocessors();
  // About one tile per block, and three per block with a short last tile.
  for (int64_t rows : {int64_t{16} * 2 * sms - 40, int64_t{16} * 2 * sms * 3 - 5}) {
    const int64_t k = 2056, ldy = rows + 5;
    std::vector<float> xf, wf;
    auto dx = test::to_device(test::random_bf16(static_cast<std::size_t>(8 * k), rng, xf));
    auto dw = test::to_device(test::random_bf16(static_cast<std::size_t>(rows * k), rng, wf));
    const std::vector<float> y0 = test::random_f32(static_cast<std::size_t>(8 * ldy), rng, 1.0f);
    std::vector<float> alone;
    for (int64_t n = 1; n <= 8; ++n) {
      auto dy = test::to_device(y0);
      const cuda::GemmSegment seg{dw.as<__nv_bfloat16>(), rows, dy.as<float>(), ldy, true};
      gemm(dx, n, k, k, {&seg, 1});
      const auto y = test::to_host<float>(dy, static_cast<std::size_t>(n * ldy));
      if (n == 8) {
        const auto want = reference(xf, wf, n, rows, k);
        std::vector<float> got;
        std::vector<double> expect;
        for (int64_t b = 0; b < n; ++b)
          for (int64_t r = 0; r < ldy; ++r) {
            const std::size_t i = static_cast<std::size_t>(b * ldy + r);
            if (r >= rows) {
              ASSERT_EQ(y[i], y0[i]) << "column " << r << " past the weight was written";
              continue;
            }
            got.push_back(y[i]);
            expect.push_back(want[static_cast<std::size_t>(b * rows + r)] + y0[i]);
          }
        EXPECT_LT(relative_l2(got, expect), 1e-6) << rows << " rows";
      }
      const std::vector<float> row0(y.begin(), y.begin() + rows);
      if (alone.empty()) alone = row0;
      EXPECT_EQ(0, std::memcmp(alone.data(), row0.data(), alone.size() * sizeof(float))) << rows << " rows, batch " << n;
    }
  }
}

// silu(g)·u in double from the bf16 inputs, for act = swiglu(x·gateᵀ, x·upᵀ).
std::vector<double> swiglu_reference(const std::vector<float>& x, const std::vector<float>& gate, const std::vector<float>& up, int64_t n,
                                     int64_t rows, int64_t k) {
  const auto g = reference(x, gate, n, rows, k), u = reference(x, up, n, rows, k);
  std::vector<double> a(g.size());
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = test::swiglu(g[i], u[i]);
  return a;
}

// Gate, up and the activation in one launch, with and without the K split, against double. Two
// errors remain: the bf16 rounding of the result (relative 2^-8 at most) and the f32 sums of gate and
// up, whose absolute error (~1e-6 of the typical product) becomes a large relative one where silu(g)·u
// is near zero. So each element is measured against max(|want|, 1% of the rms of the result).
TEST(SkinnyGemm, SwiGluMatchesDoubleReference) {
  QWENRT_REQUIRE_GPU();
  std::mt19937 rng(10);
  for (Problem p : {Problem{1, 8, 64}, {1, 13, 4096}, {3, 40, 2048}, {8, 1000, 1024}, {9, 3584, 1024}, {1, 3000, 520}, {64, 77, 768}}) {
    std::vector<float> xf, gf, uf;
    auto dx = test::to_device(test::random_bf16(static_cast<std::size_t>(p.n * p.k), rng, xf));
    auto dg = test::to_device(test::random_bf16(static_cast<std::size_t>(p.rows * p.k), rng, gf));
    auto du = test::to_device(test::random_bf16(static_cast<std::size_t>(p.rows * p.k), rng, uf));
    const int64_t ld_act = p.rows + 3;
    cuda::DeviceBuffer act(static_cast<std::size_t>(p.n * ld_act) * sizeof(__nv_bfloat16));
    test::poison(act);
    const auto before = test::to_host<uint16_t>(act, static_cast<std::size_t>(p.n * ld_act));
    Workspace ws(cuda::skinny_gemm_swiglu_workspace_bytes(p.n, p.k, p.rows));
    cuda::skinny_gemm_swiglu(dx.as<__nv_bfloat16>(), p.n, p.k, p.k, dg.as<__nv_bfloat16>(), du.as<__nv_bfloat16>(), p.rows, act.as<__nv_bfloat16>(),
                             ld_act, nullptr, ws.view());
    QWENRT_CUDA_CHECK(cudaDeviceSynchronize());
    ws.expect_counters_zero();
    const auto got = test::to_host<uint16_t>(act, static_cast<std::size_t>(p.n * ld_act));
    const auto ref = swiglu_reference(xf, gf, uf, p.n, p.rows, p.k);
    double mean_square = 0;
    for (double v : ref) mean_square += v * v;
    const double floor = 1e-2 * std::sqrt(mean_square / static_cast<double>(ref.size()));
    std::vector<float> g;
    std::vector<double> r;
    double worst = 0;
    for (int64_t b = 0; b < p.n; ++b)
      for (int64_t c = 0; c < ld_act; ++c) {
        const uint16_t v = got[b * ld_act + c];
        if (c >= p.rows) {
          EXPECT_EQ(v, before[b * ld_act + c]) << "column past the rows was written";
          continue;
        }
        const double want = ref[b * p.rows + c], have = bf16_to_f32(v);
        g.push_back(static_cast<float>(have));
        r.push_back(want);
        worst = std::max(worst, std::abs(have - want) / std::max(std::abs(want), floor));
      }
    EXPECT_LT(relative_l2(g, r), 2e-3) << "n " << p.n << " rows " << p.rows << " k " << p.k;
    EXPECT_LT(worst, 8e-3) << "n " << p.n << " rows " << p.rows << " k " << p.k;
  }
}

// The fused activation gives the bits of the two products followed by cuda::swiglu_rows.
TEST(SkinnyGemm, SwiGluMatchesUnfusedBitwise) {
  QWENRT_REQUIRE_GPU();
  std::mt19937 rng(11);
  const int64_t n = 3, rows = 3584, k = 1024;
  std::vector<float> xf, gf, uf;
  auto dx = test::to_device(test::random_bf16(static_cast<std::size_t>(n * k), rng, xf));
  auto dg = test::to_device(test::random_bf16(static_cast<std::size_t>(rows * k), rng, gf));
  auto du = test::to_device(test::random_bf16(static_cast<std::size_t>(rows * k), rng, uf));
  // Unfused with gate and up as two segments of 16-row tiles, the fused launch in 8-row pairs of
  // the same two weights: each product's K order is the same (one range, same chunks).
  ASSERT_EQ(cuda::skinny_gemm_swiglu_workspace_bytes(n, k, rows), 0u);
  cuda::DeviceBuffer gu(static_cast<std::size_t>(n * 2 * rows) * sizeof(float));
  const cuda::GemmSegment segs[2] = {{dg.as<__nv_bfloat16>(), rows, gu.as<float>(), 2 * rows, false},
                                     {du.as<__nv_bfloat16>(), rows, gu.as<float>() + rows, 2 * rows, false}};
  gemm(dx, n, k, k, segs);
  cuda::DeviceBuffer unfused(static_cast<std::size_t>(n * rows) * 2), fused(static_cast<std::size_t>(n * rows) * 2);
  cuda::swiglu_rows(gu.as<float>(), 2 * rows, unfused.as<__nv_bfloat16>(), rows, n, rows, nullptr);
  cuda::skinny_gemm_swiglu(dx.as<__nv_bfloat16>(), n, k, k, dg.as<__nv_bfloat16>(), du.as<__nv_bfloat16>(), rows, fused.as<__nv_bfloat16>(), rows,
                           nullptr);
  QWENRT_CUDA_CHECK(cudaDeviceSynchronize());
  const auto a = test::to_host<uint16_t>(unfused, static_cast<std::size_t>(n * rows));
  const auto b = test::to_host<uint16_t>(fused, static_cast<std::size_t>(n * rows));
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * 2));
}

// One launch after another through one workspace (as in a decode step): counters and partials
// of a split launch do not leak into the next of another shape.
TEST(SkinnyGemm, ConsecutiveSplitLaunchesShareOneWorkspace) {
  QWENRT_REQUIRE_GPU();
  std::mt19937 rng(12);
  const int64_t k = 4096;
  std::vector<float> xf;
  auto dx = test::to_device(test::random_bf16(static_cast<std::size_t>(2 * k), rng, xf));
  const int64_t shapes[3] = {100, 1024, 37};
  std::vector<cuda::DeviceBuffer> dw, dy;
  std::vector<std::vector<float>> wf(3);
  std::size_t need = 0;
  for (int i = 0; i < 3; ++i) {
    dw.push_back(test::to_device(test::random_bf16(static_cast<std::size_t>(shapes[i] * k), rng, wf[i])));
    dy.push_back(cuda::DeviceBuffer(static_cast<std::size_t>(2 * shapes[i]) * sizeof(float)));
    const cuda::GemmSegment seg{dw[i].as<__nv_bfloat16>(), shapes[i], dy[i].as<float>(), shapes[i], false};
    need = std::max(need, cuda::skinny_gemm_workspace_bytes(2, k, {&seg, 1}));
  }
  Workspace ws(need);
  for (int rep = 0; rep < 3; ++rep)
    for (int i = 0; i < 3; ++i) {
      const cuda::GemmSegment seg{dw[i].as<__nv_bfloat16>(), shapes[i], dy[i].as<float>(), shapes[i], false};
      cuda::skinny_gemm(dx.as<__nv_bfloat16>(), 2, k, k, {&seg, 1}, nullptr, ws.view());
    }
  QWENRT_CUDA_CHECK(cudaDeviceSynchronize());
  ws.expect_counters_zero();
  for (int i = 0; i < 3; ++i)
    EXPECT_LT(relative_l2(test::to_host<float>(dy[i], static_cast<std::size_t>(2 * shapes[i])), reference(xf, wf[i], 2, shapes[i], k)), 1e-6)
        << "weight of " << shapes[i] << " rows";
}

// RMSNorm computed by the launch itself, against rms_norm_rows followed by the plain launch (the
// same bits: both sum the squares in one order and split K alike) and against double with the exact normalised
// activations (then the bf16 rounding of x is the whole error).
TEST(SkinnyGemm, NormedRowsMatchNormThenProduct) {
  QWENRT_REQUIRE_GPU();
  std::mt19937 rng(13);
  // The last two: more row tiles than the GPU holds blocks at once, so persistent blocks take
  // several tiles each (a partial last tile in the second). Then 0.8B's q/k/v (320 tiles over a
  // short K: whole) and a launch of that size with a partial tile.
  for (Problem p :
       {Problem{1, 1000, 1024}, {3, 300, 4096}, {8, 6200, 5120}, {2, 40, 264}, {1, 30000, 1000}, {5, 20007, 520}, {1, 5120, 1024}, {8, 4100, 1032}}) {
    const int64_t ldh = p.k + 4;
    const float eps = 1e-6f;
    const auto h = test::random_f32(static_cast<std::size_t>(p.n * ldh), rng, 3.0f);
    const auto nw = test::random_f32(static_cast<std::size_t>(p.k), rng);
    std::vector<float> wf;
    auto dh = test::to_device(h), dnw = test::to_device(nw);
    auto dw = test::to_device(test::random_bf16(static_cast<std::size_t>(p.rows * p.k), rng, wf));
    cuda::DeviceBuffer xn(static_cast<std::size_t>(p.n * p.k) * 2), y_fused(static_cast<std::size_t>(p.n * p.rows) * 4),
        y_plain(static_cast<std::size_t>(p.n * p.rows) * 4);
    test::poison(y_fused);
    cuda::rms_norm_rows(dh.as<float>(), ldh, dnw.as<float>(), xn.as<__nv_bfloat16>(), p.k, p.n, p.k, eps, nullptr);
    const cuda::GemmSegment plain{dw.as<__nv_bfloat16>(), p.rows, y_plain.as<float>(), p.rows, false};
    gemm(xn, p.n, p.k, p.k, {&plain, 1});
    const cuda::GemmSegment fused{dw.as<__nv_bfloat16>(), p.rows, y_fused.as<float>(), p.rows, false};
    Workspace ws(cuda::skinny_gemm_workspace_bytes(p.n, p.k, {&fused, 1}));
    // The launch also stores the normalised rows (as the MoE's router product does for the experts).
    const int64_t ld_out = p.k + 8;
    cuda::DeviceBuffer stored(static_cast<std::size_t>(p.n * ld_out) * 2);
    test::poison(stored);
    cuda::SkinnyNormedRows normed{dh.as<float>(), ldh, dnw.as<float>(), eps};
    normed.out = stored.as<__nv_bfloat16>();
    normed.ld_out = ld_out;
    cuda::skinny_gemm(normed, p.n, p.k, {&fused, 1}, nullptr, ws.view());
    QWENRT_CUDA_CHECK(cudaDeviceSynchronize());
    ws.expect_counters_zero();
    const auto plain_rows = test::to_host<uint16_t>(xn, static_cast<std::size_t>(p.n * p.k));
    const auto stored_rows = test::to_host<uint16_t>(stored, static_cast<std::size_t>(p.n * ld_out));
    for (int64_t b = 0; b < p.n; ++b)
      EXPECT_EQ(0, std::memcmp(&plain_rows[b * p.k], &stored_rows[b * ld_out], static_cast<std::size_t>(p.k) * 2))
          << "stored row " << b << ", n " << p.n << " rows " << p.rows << " k " << p.k;
    const auto got = test::to_host<float>(y_fused, static_cast<std::size_t>(p.n * p.rows));
    const auto unfused = test::to_host<float>(y_plain, static_cast<std::size_t>(p.n * p.rows));
    EXPECT_EQ(0, std::memcmp(got.data(), unfused.data(), got.size() * sizeof(float))) << "n " << p.n << " rows " << p.rows << " k " << p.k;
    std::vector<float> x(static_cast<std::size_t>(p.n * p.k));
    for (int64_t b = 0; b < p.n; ++b) {
      double ss = 0;
      for (int64_t i = 0; i < p.k; ++i) ss += static_cast<double>(h[b * ldh + i]) * h[b * ldh + i];
      const double scale = 1.0 / std::sqrt(ss / static_cast<double>(p.k) + eps);
      for (int64_t i = 0; i < p.k; ++i) x[b * p.k + i] = static_cast<float>(h[b * ldh + i] * scale * nw[i]);
    }
    EXPECT_LT(relative_l2(got, reference(x, wf, p.n, p.rows, p.k)), 4e-3) << "n " << p.n << " rows " << p.rows << " k " << p.k;
  }
}

// The FFN's norm, gate, up and activation in one launch against the norm's own launch then the
// fused activation.
TEST(SkinnyGemm, NormedSwiGluMatchesNormThenSwiGlu) {
  QWENRT_REQUIRE_GPU();
  std::mt19937 rng(14);
  // 20000 rows: 2500 tiles, more than the GPU holds blocks at once (persistent blocks loop).
  for (const int64_t rows : {int64_t{3584}, int64_t{20000}}) {
    const int64_t n = 2, k = 1024;
    const auto h = test::random_f32(static_cast<std::size_t>(n * k), rng, 2.0f);
    const auto nw = test::random_f32(static_cast<std::size_t>(k), rng);
    std::vector<float> gf, uf;
    auto dh = test::to_device(h), dnw = test::to_device(nw);
    auto dg = test::to_device(test::random_bf16(static_cast<std::size_t>(rows * k), rng, gf));
    auto du = test::to_device(test::random_bf16(static_cast<std::size_t>(rows * k), rng, uf));
    cuda::DeviceBuffer xn(static_cast<std::size_t>(n * k) * 2), a(static_cast<std::size_t>(n * rows) * 2), b(static_cast<std::size_t>(n * rows) * 2);
    Workspace ws(cuda::skinny_gemm_swiglu_workspace_bytes(n, k, rows));
    cuda::rms_norm_rows(dh.as<float>(), k, dnw.as<float>(), xn.as<__nv_bfloat16>(), k, n, k, 1e-6f, nullptr);
    cuda::skinny_gemm_swiglu(xn.as<__nv_bfloat16>(), n, k, k, dg.as<__nv_bfloat16>(), du.as<__nv_bfloat16>(), rows, a.as<__nv_bfloat16>(), rows,
                             nullptr, ws.view());
    cuda::skinny_gemm_swiglu({dh.as<float>(), k, dnw.as<float>(), 1e-6f}, n, k, dg.as<__nv_bfloat16>(), du.as<__nv_bfloat16>(), rows,
                             b.as<__nv_bfloat16>(), rows, nullptr, ws.view());
    QWENRT_CUDA_CHECK(cudaDeviceSynchronize());
    ws.expect_counters_zero();
    const auto av = test::to_host<uint16_t>(a, static_cast<std::size_t>(n * rows)),
               bv = test::to_host<uint16_t>(b, static_cast<std::size_t>(n * rows));
    std::vector<float> af(av.size());
    std::vector<double> bd(bv.size());
    std::size_t differ = 0;
    for (std::size_t i = 0; i < av.size(); ++i) {
      af[i] = bf16_to_f32(av[i]);
      bd[i] = bf16_to_f32(bv[i]);
      differ += av[i] != bv[i];
    }
    EXPECT_LT(relative_l2(af, bd), 1e-3) << rows << " rows";
    EXPECT_LT(differ, av.size() / 20) << differ << " of " << av.size() << " elements differ, " << rows << " rows";
  }
}

TEST(SkinnyGemm, NormedRowsRejectBadInput) {
  QWENRT_REQUIRE_GPU();
  cuda::DeviceBuffer d(1 << 20);
  const cuda::SkinnyNormedRows x{d.as<float>(), 256, d.as<float>() + 4096, 1e-6f};
  const cuda::GemmSegment seg{d.as<__nv_bfloat16>() + 65536, 4, d.as<float>() + 8192, 4, false};
  EXPECT_THROW(cuda::skinny_gemm(x, 9, 256, {&seg, 1}, nullptr), Error);  // more rows than the launch normalises
  EXPECT_THROW(cuda::skinny_gemm(x, 1, cuda::kSkinnyGemmMaxNormedK + 8, {&seg, 1}, nullptr), Error);
  const cuda::GemmSegment into_h{d.as<__nv_bfloat16>() + 65536, 4, d.as<float>() + 8, 4, false};
  EXPECT_THROW(cuda::skinny_gemm(x, 1, 256, {&into_h, 1}, nullptr), Error);  // writes the rows it reads
  EXPECT_THROW(cuda::skinny_gemm({d.as<float>(), 255, d.as<float>(), 1e-6f}, 1, 256, {&seg, 1}, nullptr), Error);
  cuda::SkinnyNormedRows over_h = x;  // the normalised rows' copy written over the rows it reads
  over_h.out = reinterpret_cast<__nv_bfloat16*>(d.as<float>() + 64);
  over_h.ld_out = 256;
  EXPECT_THROW(cuda::skinny_gemm(over_h, 1, 256, {&seg, 1}, nullptr), Error);
  cuda::SkinnyNormedRows short_stride = over_h;
  short_stride.out = d.as<__nv_bfloat16>() + 200000;
  short_stride.ld_out = 128;
  EXPECT_THROW(cuda::skinny_gemm(short_stride, 1, 256, {&seg, 1}, nullptr), Error);
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
  // A workspace without the tile counters is refused too.
  EXPECT_THROW(cuda::skinny_gemm(d.as<__nv_bfloat16>(), 1, 4096, 4096, {&big, 1}, nullptr, {d.get(), d.bytes(), nullptr}), Error);
  EXPECT_THROW(
      cuda::skinny_gemm_swiglu(d.as<__nv_bfloat16>(), 1, 64, 64, d.as<__nv_bfloat16>(), d.as<__nv_bfloat16>(), 0, d.as<__nv_bfloat16>(), 4, nullptr),
      Error);
  EXPECT_THROW(
      cuda::skinny_gemm_swiglu(d.as<__nv_bfloat16>(), 1, 64, 64, d.as<__nv_bfloat16>(), d.as<__nv_bfloat16>(), 8, d.as<__nv_bfloat16>(), 4, nullptr),
      Error);
}

}  // namespace
}  // namespace qwenrt
