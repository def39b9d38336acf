// Weight-streaming matmul speed on the CPU against the memory read bandwidth measured in the same
// run: bench/matmul_bench [threads]. Prints one line per shape with GB/s and the ratio.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>

#include "backend/cpu/matmul.h"
#include "backend/cpu/memory_bandwidth.h"
#include "core/half.h"

using namespace qwenrt;

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  ThreadPool pool(threads);
  const auto bw = cpu::measure_bandwidth(pool);
  std::printf("threads %d, isa %s, read %.1f GB/s, copy %.1f GB/s\n", threads, cpu::matmul_isa(), bw.read_GBps, bw.copy_GBps);
  struct Shape {
    int64_t rows, cols, n;
  };
  for (Shape s :
       {Shape{248320, 1024, 1}, Shape{6144, 1024, 1}, Shape{1024, 3584, 1}, Shape{248320, 1024, 4}, Shape{3584, 1024, 64}, Shape{3584, 1024, 512}}) {
    std::unique_ptr<uint16_t[]> w(new uint16_t[static_cast<std::size_t>(s.rows * s.cols)]);
    for (int64_t i = 0; i < s.rows * s.cols; ++i) w[i] = f32_to_bf16(static_cast<float>((i * 2654435761u) % 1000) / 1000.0f - 0.5f);
    Weight m{WeightFormat::BF16, s.rows, s.cols, reinterpret_cast<const std::byte*>(w.get())};
    std::vector<float> x(static_cast<std::size_t>(s.n * s.cols), 0.01f), y(static_cast<std::size_t>(s.n * s.rows));
    cpu::matmul(x.data(), s.n, m, y.data(), pool);
    // Repeat until enough bytes went by for a stable number; weights larger than the caches.
    const int reps = static_cast<int>(std::max<int64_t>(3, (int64_t{2} << 30) / static_cast<int64_t>(m.bytes())));
    auto t0 = std::chrono::steady_clock::now();
    for (int r = 0; r < reps; ++r) cpu::matmul(x.data(), s.n, m, y.data(), pool);
    const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / reps;
    const double gbps = static_cast<double>(m.bytes()) / sec / 1e9;
    const double gflops = 2.0 * static_cast<double>(s.rows * s.cols * s.n) / sec / 1e9;
    std::printf("%7lld x %5lld bf16, %4lld rows: %8.3f ms  %6.1f GB/s (%3.0f%% of read)  %7.1f GFLOP/s\n", static_cast<long long>(s.rows),
                static_cast<long long>(s.cols), static_cast<long long>(s.n), sec * 1e3, gbps, 100 * gbps / bw.read_GBps, gflops);
  }
  return 0;
}
