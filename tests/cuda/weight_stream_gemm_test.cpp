#include "backend/cuda/weight_stream_gemm.h"

#include <algorithm>
#include <cmath>

#include <gtest/gtest.h>

#include "core/half.h"
#include "cuda/gpu_test_support.h"

namespace qwenrt {
namespace {

bool hopper() {
  int device = 0, major = 0;
  return cudaGetDevice(&device) == cudaSuccess && cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) == cudaSuccess &&
         major == 9;
}

// Odd shapes: rows past a whole tile, k past a whole stage and short of one k-step's upper half,
// more tiles than blocks (several tiles and ring laps per block), strided x and y, and
// accumulation into what y held; every activation row count 1..8 for one shape.
TEST(WeightStreamGemm, MatchesDoubleReference) {
  QWENRT_REQUIRE_GPU();
  if (!hopper()) GTEST_SKIP() << "bulk copies need compute capability 9.x";
  std::mt19937 rng(31);
  struct Problem {
    int64_t n, rows, k;
    bool accumulate = false;
  };
  std::vector<Problem> problems = {{1, 16, 8},       {1, 17, 264},          {3, 1000, 1032},          {8, 33, 4096},
                                   {2, 5000, 520},   {1, 40000, 256},       {4, 300, 8200, true},
                                   // Split tails: one tail step over many blocks (empty ranges), tiles
                                   // just past a round, fewer tiles than blocks, ragged rows.
                                   {1, 16 * 265, 1024}, {2, 16 * 300, 4104, true}, {1, 16 * 100, 8192}, {3, 16 * 133 + 5, 2000},
                                   {5, 16 * 397, 3000, true}};
  for (int64_t n = 1; n <= 8; ++n) problems.push_back({n, 129, 776, n % 2 == 0});
  cuda::DeviceBuffer partial(cuda::kWeightStreamWorkspaceBytes), counters(cuda::kWeightStreamMaxBlocks * sizeof(uint32_t));
  QWENRT_CUDA_CHECK(cudaMemset(counters.get(), 0, counters.bytes()));
  const cuda::SkinnyGemmWorkspace workspace{partial.get(), partial.bytes(), counters.as<uint32_t>()};
  for (const cuda::WeightStreamConfig config : {cuda::WeightStreamConfig{3, false}, {3, true}, {4, true},
                                                {6, true}, {6, false}, {3, true, 1}})
  for (const Problem& p : problems) {
    const int64_t ldx = p.k + 8, ldy = p.rows + 3;
    std::vector<float> xf, wf;
    auto xb = test::random_bf16(static_cast<std::size_t>(p.n * ldx), rng, xf);
    auto wb = test::random_bf16(static_cast<std::size_t>(p.rows * p.k), rng, wf);
    auto dx = test::to_device(xb), dw = test::to_device(wb);
    std::vector<float> y0 = test::random_f32(static_cast<std::size_t>(p.n * ldy), rng, 1.0f);
    auto dy = test::to_device(y0);
    cuda::weight_stream_gemm(dx.as<__nv_bfloat16>(), p.n, p.k, ldx, dw.as<__nv_bfloat16>(), p.rows, dy.as<float>(), ldy, p.accumulate, nullptr, workspace, config);
    QWENRT_CUDA_CHECK(cudaDeviceSynchronize());
    const auto got = test::to_host<float>(dy, static_cast<std::size_t>(p.n * ldy));
    auto want = test::matmul_reference(xf, ldx, wf, p.n, p.rows, p.k, ldy);
    std::vector<float> got_rows;
    std::vector<double> want_rows;
    for (int64_t b = 0; b < p.n; ++b)
      for (int64_t r = 0; r < ldy; ++r) {
        const std::size_t i = static_cast<std::size_t>(b * ldy + r);
        if (r >= p.rows) {
          ASSERT_EQ(got[i], y0[i]) << "row " << r << " past the weight was written";
          continue;
        }
        got_rows.push_back(got[i]);
        want_rows.push_back(want[i] + (p.accumulate ? y0[i] : 0.0));
      }
    // f32 accumulation: the error of a length-k dot product grows as sqrt(k) (1e-6 up to k ~ 2500).
    const double tolerance = std::max(1e-6, 2e-8 * std::sqrt(static_cast<double>(p.k)));
    EXPECT_LT(test::relative_l2(got_rows, want_rows), tolerance) << "n " << p.n << " rows " << p.rows << " k " << p.k << " stages " << config.stages << " round robin "
                                                             << " split tail " << config.split_tail;
    const auto left = test::to_host<uint32_t>(counters, cuda::kWeightStreamMaxBlocks);
    for (uint32_t c : left) ASSERT_EQ(c, 0u) << "a split tail left its counter set";
  }
}

// An activation row's results do not depend on how many rows run with it.
TEST(WeightStreamGemm, RowsDoNotDependOnTheBatch) {
  QWENRT_REQUIRE_GPU();
  if (!hopper()) GTEST_SKIP() << "bulk copies need compute capability 9.x";
  std::mt19937 rng(32);
  const int64_t rows = 3000, k = 4104;
  std::vector<float> xf, wf;
  auto dx = test::to_device(test::random_bf16(static_cast<std::size_t>(8 * k), rng, xf));
  auto dw = test::to_device(test::random_bf16(static_cast<std::size_t>(rows * k), rng, wf));
  cuda::DeviceBuffer alone(static_cast<std::size_t>(rows) * 4), batched(static_cast<std::size_t>(8 * rows) * 4);
  cuda::DeviceBuffer partial(cuda::kWeightStreamWorkspaceBytes), counters(cuda::kWeightStreamMaxBlocks * sizeof(uint32_t));
  QWENRT_CUDA_CHECK(cudaMemset(counters.get(), 0, counters.bytes()));
  const cuda::SkinnyGemmWorkspace workspace{partial.get(), partial.bytes(), counters.as<uint32_t>()};
  cuda::weight_stream_gemm(dx.as<__nv_bfloat16>() + 5 * k, 1, k, k, dw.as<__nv_bfloat16>(), rows, alone.as<float>(), rows, false, nullptr, workspace);
  cuda::weight_stream_gemm(dx.as<__nv_bfloat16>(), 8, k, k, dw.as<__nv_bfloat16>(), rows, batched.as<float>(), rows, false, nullptr, workspace);
  QWENRT_CUDA_CHECK(cudaDeviceSynchronize());
  const auto a = test::to_host<float>(alone, static_cast<std::size_t>(rows));
  const auto b = test::to_host<float>(batched, static_cast<std::size_t>(8 * rows));
  for (int64_t r = 0; r < rows; ++r) ASSERT_EQ(a[r], b[5 * rows + r]) << "row " << r;
}

}  // namespace
}  // namespace qwenrt
