// Weight-streaming matmul speed on the CPU against the memory read bandwidth measured in the same
// run: bench/matmul_bench [threads] [bf16|q4|q8|q4i8|q8i8] [group size]. Prints one line per shape
// with GB/s of weight bytes (packed weights, scales and biases for MLX affine) and the ratio to the
// read bandwidth; for the quantized formats also ns per 64 weight fields per thread (the products'
// compute rate). The i8 forms run the int8-activation mode (--int8-activations) over the same
// weights; group size defaults to 64.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/matmul.h"
#include "backend/cpu/memory_bandwidth.h"
#include "backend/cpu/mlx_affine_int8.h"
#include "core/half.h"

using namespace qwenrt;

namespace {

// A weight of the named format with deterministic contents; storage is kept in `bytes`/`scales`.
struct Matrix {
  std::vector<uint8_t> bytes;
  std::vector<uint16_t> scales, biases;
  Weight w;
};

Matrix make(const std::string& format, int64_t rows, int64_t cols, int gs) {
  Matrix m;
  if (format == "bf16") {
    m.bytes.resize(static_cast<std::size_t>(rows * cols) * 2);
    for (int64_t i = 0; i < rows * cols; ++i) {
      const uint16_t h = f32_to_bf16(static_cast<float>((i * 2654435761u) % 1000) / 1000.0f - 0.5f);
      std::memcpy(&m.bytes[static_cast<std::size_t>(i) * 2], &h, 2);
    }
    m.w = {WeightFormat::BF16, rows, cols, reinterpret_cast<const std::byte*>(m.bytes.data())};
    return m;
  }
  const int bits = format.rfind("q4", 0) == 0 ? 4 : 8;
  m.bytes.resize(static_cast<std::size_t>(rows * cols * bits / 8));
  std::mt19937 rng(1);
  for (auto& b : m.bytes) b = static_cast<uint8_t>(rng());
  m.scales.assign(static_cast<std::size_t>(rows * cols / gs), f32_to_bf16(0.01f));
  m.biases.assign(m.scales.size(), f32_to_bf16(-0.08f));
  m.w = {WeightFormat::MlxAffine, rows, cols, reinterpret_cast<const std::byte*>(m.bytes.data())};
  m.w.quant = {bits, gs, WeightFormat::BF16, reinterpret_cast<const std::byte*>(m.scales.data()),
               reinterpret_cast<const std::byte*>(m.biases.data())};
  return m;
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  const std::string format = argc > 2 ? argv[2] : "bf16";
  const int gs = argc > 3 ? std::atoi(argv[3]) : 64;
  if (format != "bf16" && format != "q4" && format != "q8" && format != "q4i8" && format != "q8i8") {
    std::fprintf(stderr, "matmul_bench: unknown format '%s' (bf16, q4, q8, q4i8 or q8i8)\n", format.c_str());
    return 2;
  }
  if (gs != 32 && gs != 64 && gs != 128) {
    std::fprintf(stderr, "matmul_bench: group size %d (32, 64 or 128)\n", gs);
    return 2;
  }
  cpu::set_int8_activations(format.size() == 4);
  ThreadPool pool(threads);
  const auto bw = cpu::measure_bandwidth(pool);
  std::printf("threads %d, isa %s, read %.1f GB/s, copy %.1f GB/s\n", threads, cpu::matmul_isa(), bw.read_GBps, bw.copy_GBps);
  struct Shape {
    int64_t rows, cols, n;
  };
  for (Shape s :
       {Shape{248320, 1024, 1}, Shape{6144, 1024, 1}, Shape{1024, 3584, 1}, Shape{248320, 1024, 4}, Shape{3584, 1024, 64}, Shape{3584, 1024, 512}}) {
    const Matrix m = make(format, s.rows, s.cols, gs);
    std::vector<float> x(static_cast<std::size_t>(s.n * s.cols), 0.01f), y(static_cast<std::size_t>(s.n * s.rows));
    cpu::matmul(x.data(), s.n, m.w, y.data(), pool);
    // Repeat until enough bytes went by for a stable number; weights larger than the caches.
    const int reps = static_cast<int>(std::max<int64_t>(3, (int64_t{2} << 30) / static_cast<int64_t>(m.w.bytes())));
    auto t0 = std::chrono::steady_clock::now();
    for (int r = 0; r < reps; ++r) cpu::matmul(x.data(), s.n, m.w, y.data(), pool);
    const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / reps;
    const double gbps = static_cast<double>(m.w.bytes()) / sec / 1e9;
    const double gflops = 2.0 * static_cast<double>(s.rows * s.cols * s.n) / sec / 1e9;
    std::printf("%7lld x %5lld %s, %4lld rows: %8.3f ms  %6.1f GB/s (%3.0f%% of read)  %7.1f GFLOP/s", static_cast<long long>(s.rows),
                static_cast<long long>(s.cols), format.c_str(), static_cast<long long>(s.n), sec * 1e3, gbps, 100 * gbps / bw.read_GBps, gflops);
    if (format != "bf16") std::printf("  %.2f ns / 64 fields / thread", sec * 1e9 * threads / (static_cast<double>(s.rows * s.cols) / 64));
    std::printf("\n");
  }
  return 0;
}
