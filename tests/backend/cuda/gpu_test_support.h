#pragma once
// Shared by the CUDA kernel tests: skip without a GPU, random bf16 data, device round trips and
// the relative L2 error every numeric test reports.
#include <cuda_bf16.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "backend/cuda/runtime/cuda_device.h"
#include "backend/cuda/runtime/device_buffer.h"
#include "core/half.h"

// Skips the test when this machine has no usable CUDA GPU (CI has none).
#define QWENRT_REQUIRE_GPU()                                                        \
  do {                                                                              \
    if (::qwenrt::cuda::device_count() == 0) GTEST_SKIP() << "no CUDA GPU visible"; \
    ::qwenrt::cuda::require_supported_device(0);                                    \
  } while (0)

namespace qwenrt::test {

// n values ~ N(0, scale²) rounded to bf16; `exact` receives them as floats.
inline std::vector<uint16_t> random_bf16(std::size_t n, std::mt19937& rng, std::vector<float>& exact, float scale = 1.0f) {
  std::normal_distribution<float> nd(0.0f, scale);
  std::vector<uint16_t> out(n);
  exact.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    out[i] = f32_to_bf16(nd(rng));
    exact[i] = bf16_to_f32(out[i]);
  }
  return out;
}

inline std::vector<float> random_f32(std::size_t n, std::mt19937& rng, float scale = 1.0f) {
  std::normal_distribution<float> nd(0.0f, scale);
  std::vector<float> out(n);
  for (auto& v : out) v = nd(rng);
  return out;
}

template <typename T>
cuda::DeviceBuffer to_device(const std::vector<T>& host) {
  cuda::DeviceBuffer buf(host.size() * sizeof(T));
  buf.upload(host.data(), host.size() * sizeof(T));
  return buf;
}

template <typename T>
std::vector<T> to_host(const cuda::DeviceBuffer& buf, std::size_t n) {
  std::vector<T> out(n);
  buf.download(out.data(), n * sizeof(T));
  return out;
}

// Fills a device buffer with NaN bit patterns so an element nothing wrote fails the comparison.
inline void poison(cuda::DeviceBuffer& buf) { QWENRT_CUDA_CHECK(cudaMemset(buf.get(), 0xff, buf.bytes())); }

// y[b · ldy + r] = Σ_i x[b · ldx + i] · w[r · k + i] in double (from the bf16 values as floats),
// for activation rows b < n and weight rows r < rows; y has n · ldy elements.
inline std::vector<double> matmul_reference(const std::vector<float>& x, int64_t ldx, const std::vector<float>& w, int64_t n, int64_t rows, int64_t k,
                                            int64_t ldy) {
  std::vector<double> y(static_cast<std::size_t>(n * ldy));
  for (int64_t b = 0; b < n; ++b)
    for (int64_t r = 0; r < rows; ++r) {
      double s = 0;
      for (int64_t i = 0; i < k; ++i) s += static_cast<double>(x[b * ldx + i]) * w[r * k + i];
      y[b * ldy + r] = s;
    }
  return y;
}

// The FFN's gated activation silu(g)·u in double.
inline double swiglu(double g, double u) { return g / (1.0 + std::exp(-g)) * u; }

inline double relative_l2(const std::vector<float>& got, const std::vector<double>& ref) {
  double err = 0, norm = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    const double d = static_cast<double>(got[i]) - ref[i];
    if (std::isnan(got[i])) return INFINITY;
    err += d * d;
    norm += ref[i] * ref[i];
  }
  return std::sqrt(err / (norm > 0 ? norm : 1));
}

}  // namespace qwenrt::test
