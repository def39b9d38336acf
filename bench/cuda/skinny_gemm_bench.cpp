// Decode-shaped matrix products on the GPU: qwenrt's skinny GEMM against cuBLAS on the same
// weights, as a fraction of the copy bandwidth measured in the same run.
//   cuda_skinny_gemm_bench [--quick | --one-row]
// Weights are rotated among enough copies that the 60 MB L2 never holds them: every call streams
// its weight from device memory, as a decode step does.
#include <cstdio>
#include <cstring>
#include <cublas_v2.h>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/diagnostics/device_measure.h"
#include "backend/cuda/gemm/skinny_gemm.h"
#include "backend/cuda/runtime/cuda_device.h"
#include "backend/cuda/runtime/device_buffer.h"
#include "core/half.h"
#include "cuda/cuda_bench_support.h"

using namespace qwenrt;

namespace {

struct Shape {
  const char* name;
  int64_t rows, k;
  bool swiglu = false;  // gate and up, rows each, with the activation fused (weights 2 x rows x k)
};

void check_cublas(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) fail("cuBLAS ", what, " failed: status ", static_cast<int>(s));
}

// Random bf16 (never zeros: zeros can stream faster than real data).
void fill_random(cuda::DeviceBuffer& buf, std::mt19937& rng) {
  std::vector<uint16_t> host(buf.bytes() / 2);
  std::normal_distribution<float> nd(0.0f, 0.05f);
  for (auto& h : host) h = f32_to_bf16(nd(rng));
  buf.upload(host.data(), host.size() * 2);
}

}  // namespace

int main(int argc, char** argv) try {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  const bool one_row = argc > 1 && std::strcmp(argv[1], "--one-row") == 0;
  const cuda::DeviceInfo dev = cuda::require_supported_device(0);
  const double copy = cuda::copy_bandwidth_GBps(std::size_t{2} << 30);
  std::printf("device %s, %d SMs, L2 %zu MB; copy bandwidth %.0f GB/s (read + write)\n", dev.name.c_str(), dev.multiprocessors, dev.l2_bytes >> 20,
              copy);

  const std::vector<Shape> shapes = {
      {"27b ffn up (17408x5120)", 17408, 5120},
      {"27b ffn down (5120x17408)", 5120, 17408},
      {"27b head (248320x5120)", 248320, 5120},
      {"9b ffn up (12288x4096)", 12288, 4096},
      {"0.8b qkv (6144x1024)", 6144, 1024},
      {"0.8b ffn down (1024x3584)", 1024, 3584},
      {"27b gate+up+act (2x17408x5120)", 17408, 5120, true},
      {"9b gate+up+act (2x12288x4096)", 12288, 4096, true},
      {"0.8b gate+up+act (2x3584x1024)", 3584, 1024, true},
  };
  const std::vector<int64_t> batches = one_row ? std::vector<int64_t>{1}
                                       : quick ? std::vector<int64_t>{1, 64}
                                               : std::vector<int64_t>{1, 2, 4, 8, 16, 32, 64};
  cublasHandle_t handle;
  check_cublas(cublasCreate(&handle), "create");
  std::mt19937 rng(1);
  cuda::DeviceBuffer x(static_cast<std::size_t>(64 * 17408) * 2);
  fill_random(x, rng);
  std::printf("\n%-32s %5s %10s %8s %10s %8s %7s\n", "weight", "rows", "qwenrt us", "of copy", "cuBLAS us", "of copy", "speedup");
  for (const Shape& s : shapes) {
    const int64_t weight_rows = s.swiglu ? 2 * s.rows : s.rows;  // gate and up side by side
    const std::size_t wbytes = static_cast<std::size_t>(weight_rows * s.k) * 2;
    const int copies = static_cast<int>(std::max<std::size_t>(1, (std::size_t{512} << 20) / wbytes + 1));
    std::vector<cuda::DeviceBuffer> w;
    for (int i = 0; i < copies; ++i) {
      w.emplace_back(wbytes);
      if (i == 0) fill_random(w[0], rng);
      else QWENRT_CUDA_CHECK(cudaMemcpy(w[i].get(), w[0].get(), wbytes, cudaMemcpyDeviceToDevice));
    }
    cuda::DeviceBuffer y(static_cast<std::size_t>(64 * weight_rows) * 4);
    const cuda::GemmSegment probe{w[0].as<__nv_bfloat16>(), s.rows, y.as<float>(), s.rows, false};
    cuda::DeviceBuffer ws(
        std::max(cuda::skinny_gemm_workspace_bytes(64, s.k, {&probe, 1}), cuda::skinny_gemm_swiglu_workspace_bytes(64, s.k, s.rows)));
    cuda::DeviceBuffer counters(cuda::kSkinnyGemmCounters * 4);
    QWENRT_CUDA_CHECK(cudaMemset(counters.get(), 0, counters.bytes()));
    const cuda::SkinnyGemmWorkspace workspace{ws.get(), ws.bytes(), counters.as<uint32_t>()};
    const int reps = std::max(copies, static_cast<int>(std::min<int64_t>(200, (int64_t{8} << 30) / static_cast<int64_t>(wbytes))));
    for (int64_t n : batches) {
      const double ours = bench::graph_us_per_call(reps, [&](int i, cudaStream_t st) {
        const auto* wi = w[i % copies].as<__nv_bfloat16>();
        if (s.swiglu) {
          cuda::skinny_gemm_swiglu(x.as<__nv_bfloat16>(), n, s.k, s.k, wi, wi + s.rows * s.k, s.rows, y.as<__nv_bfloat16>(), s.rows, st, workspace);
          return;
        }
        const cuda::GemmSegment seg{wi, s.rows, y.as<float>(), s.rows, false};
        cuda::skinny_gemm(x.as<__nv_bfloat16>(), n, s.k, s.k, {&seg, 1}, st, workspace);
      });
      const float one = 1.0f, zero = 0.0f;
      const double theirs = bench::graph_us_per_call(reps, [&](int i, cudaStream_t st) {
        check_cublas(cublasSetStream(handle, st), "set stream");
        check_cublas(cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(weight_rows), static_cast<int>(n), static_cast<int>(s.k), &one,
                                  w[i % copies].get(), CUDA_R_16BF, static_cast<int>(s.k), x.get(), CUDA_R_16BF, static_cast<int>(s.k), &zero,
                                  y.get(), CUDA_R_32F, static_cast<int>(weight_rows), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                     "gemm");
      });
      const double bytes = static_cast<double>(wbytes) + static_cast<double>(n * s.k * 2 + n * weight_rows * 4);
      std::printf("%-32s %5lld %10.1f %7.0f%% %10.1f %7.0f%% %6.2fx\n", s.name, static_cast<long long>(n), ours,
                  100.0 * bytes / (ours * 1e-6) / 1e9 / copy, theirs, 100.0 * bytes / (theirs * 1e-6) / 1e9 / copy, theirs / ours);
    }
  }
  cublasDestroy(handle);
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "cuda_skinny_gemm_bench: %s\n", e.what());
  return 1;
}
