#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "backend/cuda/gpu_test_support.h"
#include "backend/cuda/rows/argmax_rows.h"
#include "backend/cuda/rows/rms_norm_rows.h"
#include "backend/cuda/rows/swiglu_rows.h"
#include "core/half.h"
#include "model/qwen35_model.h"

namespace qwenrt {
namespace {

// Checks out[r, c] (bf16, row stride ld_out) against silu(gu[r, c])·gu[r, width + c] in double:
// only the final bf16 rounding (relative 2^-8 at most) and __expf's few ulps separate them. Columns past
// `width` must keep what they held.
void expect_swiglu(const std::vector<uint16_t>& got, const std::vector<uint16_t>& before, const std::vector<double>& gu, int64_t ld_gu,
                   int64_t ld_out, int64_t rows, int64_t width, const char* what) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < ld_out; ++c) {
      const uint16_t v = got[r * ld_out + c];
      if (c >= width) {
        ASSERT_EQ(v, before[r * ld_out + c]) << what << ": column " << c << " past the width was written";
        continue;
      }
      const double want = test::swiglu(gu[r * ld_gu + c], gu[r * ld_gu + width + c]);
      ASSERT_LE(std::abs(bf16_to_f32(v) - want), 4e-3 * std::abs(want) + 1e-30)
          << what << ": row " << r << " column " << c << " of " << rows << "x" << width;
    }
}

TEST(RowOps, SwiGluFromF32AndBf16Products) {
  QWENRT_REQUIRE_GPU();
  std::mt19937 rng(21);
  // One row (decode), a few rows, and prompt-sized rows through the four-wide path; an odd width
  // and an odd stride take the scalar path.
  struct Shape {
    int64_t rows, width, ld_extra;
  };
  for (Shape s : {Shape{1, 3584, 0}, {5, 1000, 4}, {64, 512, 8}, {300, 17408 / 8, 0}, {33, 77, 3}}) {
    const int64_t ld_gu = 2 * s.width + s.ld_extra, ld_out = s.width + s.ld_extra;
    std::vector<float> f32 = test::random_f32(static_cast<std::size_t>(s.rows * ld_gu), rng, 3.0f);
    std::vector<uint16_t> b16(f32.size());
    std::vector<double> exact_f32(f32.begin(), f32.end()), exact_b16(f32.size());
    for (std::size_t i = 0; i < f32.size(); ++i) {
      b16[i] = f32_to_bf16(f32[i]);
      exact_b16[i] = bf16_to_f32(b16[i]);
    }
    auto d_f32 = test::to_device(f32);
    auto d_b16 = test::to_device(b16);
    cuda::DeviceBuffer out(static_cast<std::size_t>(s.rows * ld_out) * 2);
    for (int from_bf16 = 0; from_bf16 < 2; ++from_bf16) {
      test::poison(out);
      const auto before = test::to_host<uint16_t>(out, static_cast<std::size_t>(s.rows * ld_out));
      if (from_bf16) cuda::swiglu_rows(d_b16.as<__nv_bfloat16>(), ld_gu, out.as<__nv_bfloat16>(), ld_out, s.rows, s.width, nullptr);
      else cuda::swiglu_rows(d_f32.as<float>(), ld_gu, out.as<__nv_bfloat16>(), ld_out, s.rows, s.width, nullptr);
      QWENRT_CUDA_CHECK(cudaDeviceSynchronize());
      const auto got = test::to_host<uint16_t>(out, static_cast<std::size_t>(s.rows * ld_out));
      expect_swiglu(got, before, from_bf16 ? exact_b16 : exact_f32, ld_gu, ld_out, s.rows, s.width, from_bf16 ? "bf16 in" : "f32 in");
    }
  }
}

TEST(RowOps, RmsNormMatchesDouble) {
  QWENRT_REQUIRE_GPU();
  std::mt19937 rng(22);
  // Odd strides take the scalar kernel, whole float4s the vector one.
  struct Case {
    int64_t width, x_pad, y_pad;
  };
  for (Case c : {Case{1024, 5, 2}, {5120, 5, 2}, {77, 5, 2}, {1024, 0, 0}, {5120, 4, 4}, {4100, 8, 4}}) {
    const int64_t width = c.width, rows = 9, ldx = width + c.x_pad, ldy = width + c.y_pad;
    const float eps = 1e-6f;
    const auto x = test::random_f32(static_cast<std::size_t>(rows * ldx), rng, 2.0f);
    const auto w = test::random_f32(static_cast<std::size_t>(width), rng);
    auto dx = test::to_device(x), dw = test::to_device(w);
    cuda::DeviceBuffer y(static_cast<std::size_t>(rows * ldy) * 2);
    test::poison(y);
    cuda::rms_norm_rows(dx.as<float>(), ldx, dw.as<float>(), y.as<__nv_bfloat16>(), ldy, rows, width, eps, nullptr);
    QWENRT_CUDA_CHECK(cudaDeviceSynchronize());
    const auto got = test::to_host<uint16_t>(y, static_cast<std::size_t>(rows * ldy));
    for (int64_t r = 0; r < rows; ++r) {
      double ss = 0;
      for (int64_t i = 0; i < width; ++i) ss += static_cast<double>(x[r * ldx + i]) * x[r * ldx + i];
      const double scale = 1.0 / std::sqrt(ss / static_cast<double>(width) + eps);
      for (int64_t i = 0; i < width; ++i) {
        const double want = x[r * ldx + i] * scale * w[i];
        ASSERT_LE(std::abs(bf16_to_f32(got[r * ldy + i]) - want), 4e-3 * std::abs(want) + 1e-6)
            << "width " << width << " row " << r << " column " << i;
      }
    }
  }
}

// The GPU's greedy pick equals the host's (model/qwen35_model.h argmax_row) on rows with repeated
// maxima (the first wins), NaNs (never picked over a number), all −∞ and all NaN (column 0), and
// widths below, at and above the block's 1024 threads and a real vocabulary.
TEST(RowOps, ArgmaxRowsPicksTheFirstMaximumLikeTheHost) {
  QWENRT_REQUIRE_GPU();
  std::mt19937 rng(23);
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  for (int64_t width : {int64_t{1}, int64_t{31}, int64_t{1024}, int64_t{1025}, int64_t{8191}, int64_t{248320}}) {
    const int64_t rows = 9, ldx = width + 3;
    auto x = test::random_f32(static_cast<std::size_t>(rows * ldx), rng, 4.0f);
    auto row = [&](int64_t r) { return x.data() + r * ldx; };
    std::uniform_int_distribution<int64_t> col(0, width - 1);
    // Row 1: the maximum repeated at three columns; row 2: NaNs around a maximum; row 3: all −∞;
    // row 4: all NaN; row 5: quantised values, so ties are everywhere; row 6: the maximum last.
    const int64_t c1 = col(rng), c2 = col(rng), c3 = col(rng);
    row(1)[c1] = row(1)[c2] = row(1)[c3] = 100.0f;
    for (int i = 0; i < 5; ++i) row(2)[col(rng)] = nan;
    row(2)[0] = nan;
    for (int64_t c = 0; c < width; ++c) {
      row(3)[c] = -inf;
      row(4)[c] = nan;
      row(5)[c] = std::round(row(5)[c]);
    }
    row(6)[width - 1] = 1e30f;
    auto dx = test::to_device(x);
    // One block per row (no workspace), then the wide rows in parts with a workspace.
    for (bool parts : {false, true}) {
      cuda::DeviceBuffer out(static_cast<std::size_t>(rows) * sizeof(int32_t));
      const std::size_t ws_bytes = parts ? cuda::argmax_workspace_bytes(rows, width) : 0;
      cuda::DeviceBuffer ws(std::max<std::size_t>(ws_bytes, 16));
      test::poison(out);
      test::poison(ws);
      cuda::argmax_rows(dx.as<float>(), ldx, rows, width, out.as<int32_t>(), nullptr, parts ? ws.get() : nullptr, ws_bytes);
      QWENRT_CUDA_CHECK(cudaDeviceSynchronize());
      const auto got = test::to_host<int32_t>(out, static_cast<std::size_t>(rows));
      for (int64_t r = 0; r < rows; ++r) EXPECT_EQ(got[r], argmax_row(row(r), width)) << "width " << width << " row " << r << " parts " << parts;
      EXPECT_EQ(got[1], std::min({c1, c2, c3})) << "width " << width;
      EXPECT_EQ(got[3], 0);
      EXPECT_EQ(got[4], 0);
      EXPECT_EQ(got[6], width - 1);
    }
  }
}

}  // namespace
}  // namespace qwenrt
