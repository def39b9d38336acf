#include "backend/cpu/memory_bandwidth.h"

#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <vector>

namespace qwenrt::cpu {

namespace {

__attribute__((target("avx2"))) float sum_avx2(const float* p, std::size_t n) {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  std::size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    a0 = _mm256_add_ps(a0, _mm256_loadu_ps(p + i));
    a1 = _mm256_add_ps(a1, _mm256_loadu_ps(p + i + 8));
    a2 = _mm256_add_ps(a2, _mm256_loadu_ps(p + i + 16));
    a3 = _mm256_add_ps(a3, _mm256_loadu_ps(p + i + 24));
  }
  float out[8];
  _mm256_storeu_ps(out, _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
  float s = 0;
  for (float v : out) s += v;
  for (; i < n; ++i) s += p[i];
  return s;
}

float sum_scalar(const float* p, std::size_t n) {
  float s = 0;
  for (std::size_t i = 0; i < n; ++i) s += p[i];
  return s;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

Bandwidth measure_bandwidth(ThreadPool& pool, std::size_t bytes, int repeats) {
  const std::size_t n = bytes / sizeof(float);
  std::unique_ptr<float[]> a(new float[n]), b(new float[n]);
  // First touch from the workers so pages land where they will be read.
  pool.parallel_for(n, 1 << 16, [&](std::size_t i0, std::size_t i1) {
    for (std::size_t i = i0; i < i1; ++i) a[i] = b[i] = static_cast<float>(i & 1023);
  });
  const bool avx2 = __builtin_cpu_supports("avx2");
  Bandwidth bw{0, 0};
  std::vector<float> sink(n / (1 << 16) + 1);  // one slot per range: no two threads share one
  volatile float guard = 0;
  for (int r = 0; r < repeats; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    pool.parallel_for(n, 1 << 16, [&](std::size_t i0, std::size_t i1) {
      float s = avx2 ? sum_avx2(a.get() + i0, i1 - i0) : sum_scalar(a.get() + i0, i1 - i0);
      sink[i0 / (1 << 16)] += s;
    });
    bw.read_GBps = std::max(bw.read_GBps, static_cast<double>(n * sizeof(float)) / seconds_since(t0) / 1e9);
    t0 = std::chrono::steady_clock::now();
    pool.parallel_for(n, 1 << 16, [&](std::size_t i0, std::size_t i1) { std::memcpy(b.get() + i0, a.get() + i0, (i1 - i0) * sizeof(float)); });
    bw.copy_GBps = std::max(bw.copy_GBps, 2.0 * static_cast<double>(n * sizeof(float)) / seconds_since(t0) / 1e9);
  }
  for (float s : sink) guard = guard + s;
  (void)guard;
  return bw;
}

}  // namespace qwenrt::cpu
