// Prompt-window products on the CPU for Qwen3.5-0.8B shapes, against this machine's FMA peak
// measured in the same run: bench/prompt_gemm_bench [threads] [reps].
//
// Times the matrices of one Gated DeltaNet layer, one gated-attention layer and one MLP (each as
// the model issues them: one matmul_multi per group of projections that share an input) for
// windows of 64 and 512 rows, bf16 and MLX affine 4-bit (group 64) weights, through the blocked
// kernel (what cpu::matmul runs for windows) and through the one-row kernel on the same window
// (the product before the blocked kernels), in alternated repetitions. Prompt tok/s is the
// window over the whole model's time in these products (18 DeltaNet + 6 attention layers, 24
// MLPs; the head runs for the last row only and is left out); the rest of a prompt step
// (DeltaNet recurrence, attention, norms) is not in it: `qwenrt bench` measures all of it.
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/matmul.h"
#include "backend/cpu/matmul_blocked.h"
#include "backend/cpu/matmul_formats.h"
#include "core/half.h"

using namespace qwenrt;

namespace {

// 12 independent FMA chains per thread (enough to cover the FMA latency on two pipes); the
// result of every chain is consumed so none is optimised away.
__attribute__((target("avx2,fma"))) double fma_loop(int64_t iters) {
  __m256 a[12];
  for (int i = 0; i < 12; ++i) a[i] = _mm256_set1_ps(static_cast<float>(i) * 1e-3f);
  const __m256 m = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-7f);
  for (int64_t it = 0; it < iters; ++it)
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) a[i] = _mm256_fmadd_ps(a[i], m, c);
  __m256 s = a[0];
  for (int i = 1; i < 12; ++i) s = _mm256_add_ps(s, a[i]);
  float out[8];
  _mm256_storeu_ps(out, s);
  return out[0];
}

// The same with 16-lane registers (the blocked kernels' tiles where the machine has AVX-512).
__attribute__((target("avx512f"))) double fma_loop512(int64_t iters) {
  __m512 a[12];
  for (int i = 0; i < 12; ++i) a[i] = _mm512_set1_ps(static_cast<float>(i) * 1e-3f);
  const __m512 m = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-7f);
  for (int64_t it = 0; it < iters; ++it)
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) a[i] = _mm512_fmadd_ps(a[i], m, c);
  __m512 s = a[0];
  for (int i = 1; i < 12; ++i) s = _mm512_add_ps(s, a[i]);
  alignas(64) float out[16];
  _mm512_store_ps(out, s);
  return out[0];
}

// The FMA rate of the widest registers the blocked kernels use here.
double fma_peak_gflops(ThreadPool& pool) {
  const int64_t iters = 20'000'000;
  const bool wide = cpu::have_avx512();
  double best = 0, sink = 0;
  for (int rep = 0; rep < 5; ++rep) {
    auto t0 = std::chrono::steady_clock::now();
    pool.parallel_for(pool.size(), 1, [&](std::size_t b, std::size_t e) {
      for (std::size_t t = b; t < e; ++t) sink += wide ? fma_loop512(iters) : fma_loop(iters);  // racy sum: only to keep results alive
    });
    const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, static_cast<double>(pool.size()) * static_cast<double>(iters) * 12 * (wide ? 16 : 8) * 2 / sec / 1e9);
  }
  if (sink == 12345.0) std::printf(" ");
  return best;
}

struct Matrix {
  std::vector<uint8_t> data;
  std::vector<uint16_t> scales, biases;
  Weight w;
};

Matrix make(bool q4, int64_t rows, int64_t cols, std::mt19937& rng) {
  Matrix m;
  std::uniform_int_distribution<int> byte(0, 255);
  if (!q4) {
    m.data.resize(static_cast<std::size_t>(rows * cols) * 2);
    for (std::size_t i = 0; i < m.data.size(); i += 2) {
      const uint16_t h = f32_to_bf16(static_cast<float>(byte(rng) - 128) / 2048.0f);
      m.data[i] = static_cast<uint8_t>(h), m.data[i + 1] = static_cast<uint8_t>(h >> 8);
    }
    m.w = {WeightFormat::BF16, rows, cols, reinterpret_cast<const std::byte*>(m.data.data())};
    return m;
  }
  m.data.resize(static_cast<std::size_t>(rows * cols / 2));
  for (auto& b : m.data) b = static_cast<uint8_t>(byte(rng));
  for (int64_t g = 0; g < rows * cols / 64; ++g) {
    m.scales.push_back(f32_to_bf16(1e-3f * static_cast<float>(byte(rng) + 1)));
    m.biases.push_back(f32_to_bf16(-8e-3f * static_cast<float>(byte(rng) + 1)));
  }
  m.w = {WeightFormat::MlxAffine, rows, cols, reinterpret_cast<const std::byte*>(m.data.data())};
  m.w.quant = {4, 64, WeightFormat::BF16, reinterpret_cast<const std::byte*>(m.scales.data()), reinterpret_cast<const std::byte*>(m.biases.data())};
  return m;
}

// One matmul_multi call of the model: outputs sharing one input of width k, `count` per token.
struct Group {
  const char* name;
  int64_t k;
  std::vector<int64_t> outputs;
  int count;
};

// Qwen3.5-0.8B: hidden 1024, DeltaNet 16 key / 16 value heads of 128, attention 8 q (+ gate) /
// 2 kv heads of 256, MLP 3584; 18 DeltaNet and 6 attention layers.
const std::vector<Group> kGroups = {
    {"deltanet in (qkv, z, b, a)", 1024, {6144, 2048, 16, 16}, 18},
    {"deltanet out", 2048, {1024}, 18},
    {"attention in (q+gate, k, v)", 1024, {4096, 512, 512}, 6},
    {"attention out", 2048, {1024}, 6},
    {"mlp gate, up", 1024, {3584, 3584}, 24},
    {"mlp down", 3584, {1024}, 24},
};

// All outputs of a group over the pool with one kernel for every output (what matmul_multi does,
// with the kernel fixed instead of chosen by the window size).
void run_group(cpu::RowKernel kernel, const float* x, int64_t n, int64_t k, const std::vector<Matrix>& ms, std::vector<std::vector<float>>& ys,
               ThreadPool& pool) {
  std::vector<int64_t> starts{0};
  for (const auto& m : ms) starts.push_back(starts.back() + m.w.rows);
  pool.parallel_for(static_cast<std::size_t>(starts.back()), 64, [&](std::size_t b, std::size_t e) {
    for (std::size_t o = 0; o < ms.size(); ++o) {
      const int64_t lo = std::max<int64_t>(static_cast<int64_t>(b), starts[o]), hi = std::min<int64_t>(static_cast<int64_t>(e), starts[o + 1]);
      if (lo < hi) kernel(x, n, k, ms[o].w, ys[o].data(), ms[o].w.rows, lo - starts[o], hi - starts[o]);
    }
  });
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  const int reps = argc > 2 ? std::atoi(argv[2]) : 3;
  ThreadPool pool(threads);
  const double peak = fma_peak_gflops(pool);
  std::printf("threads %d, isa %s, FMA peak %.1f GFLOP/s (f32, measured), reps %d alternated\n", threads, cpu::matmul_isa(), peak, reps);
  std::mt19937 rng(5);
  for (bool q4 : {false, true}) {
    std::vector<std::vector<Matrix>> mats;
    for (const auto& g : kGroups) {
      mats.emplace_back();
      for (int64_t rows : g.outputs) mats.back().push_back(make(q4, rows, g.k, rng));
    }
    const cpu::RowKernel row = q4 ? static_cast<cpu::RowKernel>(cpu::mlx_affine_rows) : cpu::dense_rows;
    const cpu::RowKernel blocked = q4 ? static_cast<cpu::RowKernel>(cpu::mlx_affine_rows_blocked) : cpu::dense_rows_blocked;
    for (int64_t n : {64, 512}) {
      std::vector<float> x(static_cast<std::size_t>(n * 3584));
      std::normal_distribution<float> nd;
      for (auto& v : x) v = nd(rng);
      // Seconds of the whole model's products for one window: min and max over reps.
      double best[2] = {1e30, 1e30}, worst[2] = {0, 0}, flops = 0;
      for (size_t gi = 0; gi < kGroups.size(); ++gi)
        for (int64_t rows : kGroups[gi].outputs) flops += 2.0 * static_cast<double>(n * rows * kGroups[gi].k) * kGroups[gi].count;
      std::vector<std::vector<std::vector<float>>> ys(kGroups.size());
      for (size_t gi = 0; gi < kGroups.size(); ++gi)
        for (int64_t rows : kGroups[gi].outputs) ys[gi].emplace_back(static_cast<std::size_t>(n * rows));
      for (int rep = 0; rep < reps; ++rep)
        for (int which = 0; which < 2; ++which) {
          double total = 0;
          for (size_t gi = 0; gi < kGroups.size(); ++gi) {
            auto t0 = std::chrono::steady_clock::now();
            run_group(which == 0 ? row : blocked, x.data(), n, kGroups[gi].k, mats[gi], ys[gi], pool);
            total += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() * kGroups[gi].count;
          }
          best[which] = std::min(best[which], total);
          worst[which] = std::max(worst[which], total);
        }
      for (int which = 0; which < 2; ++which)
        std::printf("%-5s %3lld rows, %-8s kernel: prompt %6.1f tok/s (slowest rep %6.1f)  %6.1f GFLOP/s  %3.0f%% of FMA peak\n",
                    q4 ? "q4g64" : "bf16", static_cast<long long>(n), which == 0 ? "one-row" : "blocked", static_cast<double>(n) / best[which],
                    static_cast<double>(n) / worst[which], flops / best[which] / 1e9, 100 * flops / best[which] / 1e9 / peak);
      std::printf("%-5s %3lld rows: blocked / one-row = %.2fx\n", q4 ? "q4g64" : "bf16", static_cast<long long>(n), best[0] / best[1]);
    }
  }
  return 0;
}
