// The quantized CUDA kernels on random packed weights made by the engine's uploader: decode
// products (skinny_quant_gemm) against the CPU's product over the same packed weights and the same
// bf16-rounded activations, and bit for bit alone vs among 64 rows; the prompt path's dequantized
// bf16 rows and the embedding lookup against the decoding the CPU test checks (quant_decode_test).
#include "backend/cuda/quant/skinny_quant_gemm.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/matmul.h"
#include "backend/cuda/gpu_test_support.h"
#include "backend/cuda/quant/dequantize_rows.h"
#include "backend/cuda/quant/quant_decode.cuh"
#include "backend/cuda/quant/quant_test_weights.h"

namespace qwenrt {
namespace {

// A format and the layout its upload takes: `tiled` affine weights go to the tensor-core tiles
// (affine_tiles.h; the engine's choice), the others stay row-major.
struct Format {
  std::string name;
  std::function<test::HostQuantWeight(int64_t rows, int64_t cols, std::mt19937&)> make;
  bool tiled = false;
};

// Every format; the affine ones twice, in tiles and in rows.
std::vector<Format> formats() {
  std::vector<Format> all = {
      {"affine 4-bit g64 bf16", [](int64_t r, int64_t c, std::mt19937& g) { return test::random_affine(r, c, 4, 64, WeightFormat::BF16, g); }},
      {"affine 8-bit g32 f16", [](int64_t r, int64_t c, std::mt19937& g) { return test::random_affine(r, c, 8, 32, WeightFormat::F16, g); }},
      {"affine 3-bit g128 f32 (4-bit containers)",
       [](int64_t r, int64_t c, std::mt19937& g) { return test::random_affine(r, c, 3, 128, WeightFormat::F32, g); }},
      {"affine 2-bit g64 bf16 (4-bit containers)",
       [](int64_t r, int64_t c, std::mt19937& g) { return test::random_affine(r, c, 2, 64, WeightFormat::BF16, g); }},
      {"affine 5-bit g32 bf16 (8-bit containers)",
       [](int64_t r, int64_t c, std::mt19937& g) { return test::random_affine(r, c, 5, 32, WeightFormat::BF16, g); }},
      {"affine 6-bit g64 bf16 (8-bit containers)",
       [](int64_t r, int64_t c, std::mt19937& g) { return test::random_affine(r, c, 6, 64, WeightFormat::BF16, g); }},
      {"fp8 128x128 bf16", [](int64_t r, int64_t c, std::mt19937& g) { return test::random_fp8(r, c, 128, 128, WeightFormat::BF16, g); }},
      {"fp8 32x64 f32", [](int64_t r, int64_t c, std::mt19937& g) { return test::random_fp8(r, c, 32, 64, WeightFormat::F32, g); }},
      // Only the smallest exponents (subnormals among them): the kernels' bit moves must keep them.
      {"fp8 16x16 small codes",
       [](int64_t r, int64_t c, std::mt19937& g) {
         auto h = test::random_fp8(r, c, 16, 16, WeightFormat::F32, g);
         for (auto& b : h.data) b &= 0x8f;
         return h;
       }},
      {"affine 4-bit g32 bf16", [](int64_t r, int64_t c, std::mt19937& g) { return test::random_affine(r, c, 4, 32, WeightFormat::BF16, g); }},
      {"affine 8-bit g128 bf16", [](int64_t r, int64_t c, std::mt19937& g) { return test::random_affine(r, c, 8, 128, WeightFormat::BF16, g); }},
      {"affine 4-bit g128 f16", [](int64_t r, int64_t c, std::mt19937& g) { return test::random_affine(r, c, 4, 128, WeightFormat::F16, g); }},
  };
  const std::size_t listed = all.size();
  for (std::size_t i = 0; i < listed; ++i) {
    std::mt19937 probe(0);
    const Weight w = all[i].make(16, 128, probe).w;
    if (w.format != WeightFormat::MlxAffine) continue;
    Format rows = all[i];
    rows.name += ", rows";
    all[i].name += ", tiles";
    all[i].tiled = true;
    all.push_back(rows);
  }
  return all;
}

// n rows of bf16 activations (row stride ldx) on the device and as floats.
struct Activations {
  std::vector<float> exact;
  cuda::DeviceBuffer dev;
};
Activations activations(int64_t n, int64_t ldx, std::mt19937& rng) {
  Activations a;
  const auto bits = test::random_bf16(static_cast<std::size_t>(n * ldx), rng, a.exact);
  a.dev = test::to_device(bits);
  return a;
}

// x rows [b0, b0 + n) (stride ldx) packed with stride k as f32, for the CPU product.
std::vector<float> packed_rows(const std::vector<float>& x, int64_t b0, int64_t n, int64_t k, int64_t ldx) {
  std::vector<float> out(static_cast<std::size_t>(n * k));
  for (int64_t b = 0; b < n; ++b)
    for (int64_t i = 0; i < k; ++i) out[static_cast<std::size_t>(b * k + i)] = x[static_cast<std::size_t>((b0 + b) * ldx + i)];
  return out;
}

// The products over the device's weights, y [n, ldy] (poisoned first unless accumulating into y0).
std::vector<float> gpu_product(const Activations& x, int64_t n, int64_t k, int64_t ldx, const std::vector<const Weight*>& ws,
                               std::vector<int64_t>& cols_at, int64_t& ldy, const std::vector<float>* y0 = nullptr, int64_t b0 = 0) {
  ldy = 0;
  cols_at.clear();
  for (const Weight* w : ws) cols_at.push_back(ldy), ldy += w->rows;
  ldy += 3;  // outputs inside a wider row
  cuda::DeviceBuffer y(static_cast<std::size_t>(n * ldy) * sizeof(float));
  if (y0) y.upload(y0->data(), y0->size() * sizeof(float));
  else test::poison(y);
  std::vector<cuda::QuantSegment> segs;
  for (std::size_t i = 0; i < ws.size(); ++i) segs.push_back({device_quant(*ws[i]), y.as<float>() + cols_at[i], ldy, y0 != nullptr});
  cuda::skinny_quant_gemm(x.dev.as<__nv_bfloat16>() + b0 * ldx, n, k, ldx, segs, nullptr);
  QWENRT_CUDA_CHECK(cudaDeviceSynchronize());
  auto out = test::to_host<float>(y, static_cast<std::size_t>(n * ldy));
  return out;
}

TEST(SkinnyQuantGemm, MatchesTheCpuProductOverTheSamePackedWeights) {
  QWENRT_REQUIRE_GPU();
  ThreadPool pool(1);
  for (const Format& f : formats()) {
    std::mt19937 rng(21);
    const int64_t k = 1280, ldx = 1288;
    auto a = f.make(301, k, rng);  // rows past a block of 8 warps, a partial tile
    auto b = f.make(8, k, rng);
    const auto da = test::upload(a.w, f.tiled), db = test::upload(b.w, f.tiled);
    ASSERT_EQ(a.w.bound.tiled, f.tiled) << f.name;
    for (int64_t n : {1, 3, 8, 12, 33, 64}) {  // above 8: launches of several n-tiles (the rows kernel: 8 rows at a time)
      const Activations x = activations(n, ldx, rng);
      std::vector<int64_t> at;
      int64_t ldy = 0;
      const auto got = gpu_product(x, n, k, ldx, {&a.w, &b.w}, at, ldy);
      // The CPU product over the same packed weights, on the same bf16 activations.
      const auto xs = packed_rows(x.exact, 0, n, k, ldx);
      std::vector<float> want(static_cast<std::size_t>(n * ldy), 0.0f);
      std::vector<cpu::MatmulOutput> outs{{a.w, want.data() + at[0], ldy}, {b.w, want.data() + at[1], ldy}};
      cpu::matmul_multi(xs.data(), n, k, outs, pool);
      // And in double from the decoded values (an independent sum).
      std::vector<double> ref(want.size(), 0.0), cpu(want.size(), 0.0);
      std::vector<float> got_cmp(want.size(), 0.0f);
      for (int64_t bb = 0; bb < n; ++bb)
        for (int s = 0; s < 2; ++s) {
          const Weight& w = s == 0 ? a.w : b.w;
          std::vector<float> row(static_cast<std::size_t>(k));
          for (int64_t r = 0; r < w.rows; ++r) {
            w.row_to_f32(r, row.data());
            double acc = 0;
            for (int64_t i = 0; i < k; ++i) acc += static_cast<double>(xs[static_cast<std::size_t>(bb * k + i)]) * row[static_cast<std::size_t>(i)];
            const auto idx = static_cast<std::size_t>(bb * ldy + at[static_cast<std::size_t>(s)] + r);
            ref[idx] = acc;
            cpu[idx] = want[idx];
            got_cmp[idx] = got[idx];
          }
        }
      const double err = test::relative_l2(got_cmp, ref), cpu_err = test::relative_l2(std::vector<float>(cpu.begin(), cpu.end()), ref);
      const double vs_cpu = test::relative_l2(got_cmp, cpu);
      std::printf("[ quant    ] %s n=%lld: gpu rel_l2 %.3e vs float64, cpu %.3e, gpu vs cpu %.3e\n", f.name.c_str(), static_cast<long long>(n), err,
                  cpu_err, vs_cpu);
      // Same weights, same activations: only the f32 summation order differs.
      EXPECT_LE(err, 1e-5) << f.name << " n=" << n;
      EXPECT_LE(vs_cpu, 1e-5) << f.name << " n=" << n;
    }
  }
}

// Up to 8 rows run one n-tile a launch, more run four (32 rows a launch): a row's sums are the same
// bits every way.
TEST(SkinnyQuantGemm, ARowsResultIsTheSameAloneAndAmongSixtyFour) {
  QWENRT_REQUIRE_GPU();
  for (const Format& f : formats()) {
    std::mt19937 rng(22);
    const int64_t k = 2048, ldx = 2048, most = cuda::kSkinnyQuantMaxRows;
    auto a = f.make(96, k, rng);
    const auto da = test::upload(a.w, f.tiled);
    const Activations x = activations(most, ldx, rng);
    std::vector<int64_t> at;
    int64_t ldy = 0;
    const auto all = gpu_product(x, most, k, ldx, {&a.w}, at, ldy);
    for (int64_t b = 0; b < most; ++b) {
      const auto alone = gpu_product(x, 1, k, ldx, {&a.w}, at, ldy, nullptr, b);
      for (int64_t r = 0; r < a.w.rows; ++r)
        ASSERT_EQ(std::memcmp(&alone[static_cast<std::size_t>(r)], &all[static_cast<std::size_t>(b * ldy + r)], 4), 0)
            << f.name << " row " << b << " weight row " << r << ": " << alone[static_cast<std::size_t>(r)] << " alone vs "
            << all[static_cast<std::size_t>(b * ldy + r)] << " among " << most;
    }
    // 3 rows from row 5, 8 from row 50, 12 from row 20, 19 from row 40, 40 from row 3: the same bits again.
    for (const auto& [n, b0] : {std::pair<int64_t, int64_t>{3, 5}, {8, 50}, {12, 20}, {19, 40}, {40, 3}}) {
      const auto some = gpu_product(x, n, k, ldx, {&a.w}, at, ldy, nullptr, b0);
      for (int64_t b = 0; b < n; ++b)
        for (int64_t r = 0; r < a.w.rows; ++r)
          ASSERT_EQ(std::memcmp(&some[static_cast<std::size_t>(b * ldy + r)], &all[static_cast<std::size_t>((b + b0) * ldy + r)], 4), 0)
              << f.name << ": row " << b0 + b << " among " << n;
    }
  }
}

// The tiled kernel runs the deepest batch of loads whose blocks all fit the GPU at once: on 132
// multiprocessors, 4-bit: 4 tiles take depth 4, 300 tiles depth 3, and the 10,000 of all three
// weights in one launch depth 2; 8-bit: 4 tiles depth 2 (units), the others depth 1. Each weight's
// rows are the same bits every way.
TEST(SkinnyQuantGemm, EveryBatchDepthGivesTheSameBits) {
  QWENRT_REQUIRE_GPU();
  for (int bits : {4, 8}) {
    std::mt19937 rng(25);
    const int64_t k = 256, n = 8;
    auto small = test::random_affine(64, k, bits, 64, WeightFormat::BF16, rng);
    auto wave = test::random_affine(300 * 16, k, bits, 64, WeightFormat::BF16, rng);
    auto many = test::random_affine(9696 * 16, k, bits, 64, WeightFormat::BF16, rng);
    const auto ds = test::upload(small.w), dw = test::upload(wave.w), dm = test::upload(many.w);
    const Activations x = activations(n, k, rng);
    std::vector<int64_t> at;
    int64_t ldy = 0;
    const auto small_alone = gpu_product(x, n, k, k, {&small.w}, at, ldy);
    const int64_t ld_small = ldy;
    const auto wave_alone = gpu_product(x, n, k, k, {&wave.w}, at, ldy);
    const int64_t ld_wave = ldy;
    const auto together = gpu_product(x, n, k, k, {&small.w, &wave.w, &many.w}, at, ldy);
    for (int64_t b = 0; b < n; ++b) {
      for (int64_t r = 0; r < small.w.rows; ++r)
        ASSERT_EQ(std::memcmp(&small_alone[static_cast<std::size_t>(b * ld_small + r)], &together[static_cast<std::size_t>(b * ldy + at[0] + r)], 4),
                  0)
            << bits << "-bit row " << b << ", weight row " << r << " of 4 tiles";
      for (int64_t r = 0; r < wave.w.rows; ++r)
        ASSERT_EQ(std::memcmp(&wave_alone[static_cast<std::size_t>(b * ld_wave + r)], &together[static_cast<std::size_t>(b * ldy + at[1] + r)], 4), 0)
            << bits << "-bit row " << b << ", weight row " << r << " of 300 tiles";
    }
  }
}

TEST(SkinnyQuantGemm, AccumulatesIntoTheResidual) {
  QWENRT_REQUIRE_GPU();
  for (const bool tiled : {true, false}) {
    std::mt19937 rng(23);
    const int64_t k = 512, n = 4;
    auto a = test::random_affine(40, k, 4, 64, WeightFormat::BF16, rng);
    auto b = test::random_fp8(24, k, 128, 128, WeightFormat::BF16, rng);
    const auto da = test::upload(a.w, tiled), db = test::upload(b.w, tiled);
    const Activations x = activations(n, k, rng);
    std::vector<int64_t> at;
    int64_t ldy = 0;
    const auto plain = gpu_product(x, n, k, k, {&a.w, &b.w}, at, ldy);
    const auto y0 = test::random_f32(static_cast<std::size_t>(n * ldy), rng);
    const auto summed = gpu_product(x, n, k, k, {&a.w, &b.w}, at, ldy, &y0);
    for (int64_t bb = 0; bb < n; ++bb)
      for (int64_t c = 0; c < ldy; ++c) {
        const auto i = static_cast<std::size_t>(bb * ldy + c);
        const bool written = c < a.w.rows + b.w.rows;
        // y0 + product in f32, one rounding; the columns past the outputs keep y0.
        EXPECT_EQ(summed[i], written ? y0[i] + plain[i] : y0[i]) << (tiled ? "tiles " : "rows ") << bb << ", " << c;
      }
  }
}

TEST(QuantDequantize, PromptRowsAndEmbeddingLookupDecodeAsTheCpu) {
  QWENRT_REQUIRE_GPU();
  for (const Format& f : formats()) {
    std::mt19937 rng(24);
    const int64_t rows = 200, cols = 256;
    auto h = f.make(rows, cols, rng);  // 200 rows: a partial tile
    const auto d = test::upload(h.w, f.tiled);
    const cuda::QuantMatrix m = device_quant(h.w);
    // Rows [37, 37 + 150) to bf16.
    cuda::DeviceBuffer out(150 * cols * 2);
    test::poison(out);
    cuda::dequantize_rows(m, 37, 150, out.as<__nv_bfloat16>(), nullptr);
    const auto got = test::to_host<uint16_t>(out, 150 * cols);
    std::vector<float> row(static_cast<std::size_t>(cols));
    for (int64_t r = 0; r < 150; ++r) {
      h.w.row_to_f32(37 + r, row.data());
      for (int64_t c = 0; c < cols; ++c)
        ASSERT_EQ(got[static_cast<std::size_t>(r * cols + c)], f32_to_bf16(row[static_cast<std::size_t>(c)]))
            << f.name << " (" << 37 + r << ", " << c << ")";
    }
    // Embedding rows: tokens 5, 199, 0 given, and one taken from an earlier step's picks.
    const std::vector<int32_t> tokens{5, 199, 0, -1}, from{-1, -1, -1, 1}, picks{7, 123};
    const auto dt = test::to_device(tokens), df = test::to_device(from), dp = test::to_device(picks);
    cuda::DeviceBuffer emb(4 * cols * 4);
    test::poison(emb);
    cuda::embed_quant_rows(dt.as<int32_t>(), df.as<int32_t>(), dp.as<int32_t>(), 4, m, emb.as<float>(), nullptr);
    const auto e = test::to_host<float>(emb, 4 * cols);
    for (int i = 0; i < 4; ++i) {
      h.w.row_to_f32(i == 3 ? 123 : tokens[static_cast<std::size_t>(i)], row.data());
      ASSERT_EQ(std::memcmp(e.data() + i * cols, row.data(), static_cast<std::size_t>(cols) * 4), 0) << f.name << " embedding row " << i;
    }
  }
}

}  // namespace
}  // namespace qwenrt
