// The prompt products of a prefill at the released models' shapes, each as the engine calls it
// (cuBLAS through backend/cuda/cublas_gemm: f32 outputs, accumulation into the residual, bf16 for
// gate/up), against the bf16 GEMM rate measured in the same run (8192 x 5120 x 17408, f32 out):
//   cuda_prefill_gemm_bench [--quick]
// Prints TFLOP/s per product, its fraction of that rate, and the products' time per prefill.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "backend/cuda/diagnostics/device_measure.h"
#include "backend/cuda/gemm/cublas_gemm.h"
#include "backend/cuda/runtime/cuda_device.h"
#include "backend/cuda/runtime/device_buffer.h"
#include "cuda/cuda_bench_support.h"
#include "model/cuda/cuda_forward.h"
#include "model/released_shapes.h"

using namespace qwenrt;

namespace {

enum class Out { F32, F32Accumulate, Bf16 };

struct Product {
  const char* name;
  int64_t k, rows;
  Out out;
  int64_t per_prefill;  // launches per prefill (layers using it)
};

std::vector<Product> products_of(const ModelConfig& c) {
  const int64_t H = c.hidden_size, I = c.intermediate_size, gdn = c.count(LayerKind::LinearAttention), attn = c.count(LayerKind::FullAttention);
  const int64_t vd = c.value_dim();
  const int64_t qd = c.num_heads * c.head_dim, kvd = c.num_kv_heads * c.head_dim;
  return {
      {"deltanet in_proj (qkv|z|b|a)", H, deltanet_in_proj_stride(c), Out::F32, gdn},
      {"deltanet out_proj (+= h)", vd, H, Out::F32Accumulate, gdn},
      {"attention q|gate|k|v", H, 2 * qd + 2 * kvd, Out::F32, attn},
      {"attention o_proj (+= h)", qd, H, Out::F32Accumulate, attn},
      {"ffn gate|up (bf16)", H, 2 * I, Out::Bf16, gdn + attn},
      {"ffn down (+= h)", I, H, Out::F32Accumulate, gdn + attn},
  };
}

}  // namespace

int main(int argc, char** argv) try {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  const auto dev = cuda::require_supported_device(0);
  const int64_t T = 8192;
  cudaStream_t stream;
  QWENRT_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cuda::CublasGemm gemm;
  const double reference = cuda::cublas_gemm_TFLOPs(8192, 5120, 17408);
  std::printf("%s; bf16 GEMM rate (8192 x 5120 x 17408, f32 out): %.0f TFLOP/s\n\n", dev.name.c_str(), reference);
  std::printf("| model | product | T x k x rows | TFLOP/s | of rate | ms per prefill (%lld rows) |\n|---|---|---|---|---|---|\n",
              static_cast<long long>(T));
  const std::vector<std::string> models = quick ? std::vector<std::string>{"27b"} : std::vector<std::string>{"27b", "9b", "0.8b"};
  for (const std::string& m : models) {
    const ModelConfig c = released_shape(m);
    double total_ms = 0, total_flop = 0;
    for (const Product& p : products_of(c)) {
      cuda::DeviceBuffer x(static_cast<std::size_t>(T * p.k) * 2), w(static_cast<std::size_t>(p.rows * p.k) * 2),
          y(static_cast<std::size_t>(T * p.rows) * 4);
      cuda::fill_uniform_bf16(x.as<__nv_bfloat16>(), static_cast<std::size_t>(T * p.k), 1.0f, 1, stream);
      cuda::fill_uniform_bf16(w.as<__nv_bfloat16>(), static_cast<std::size_t>(p.rows * p.k), 0.02f, 2, stream);
      QWENRT_CUDA_CHECK(cudaMemsetAsync(y.get(), 0, y.bytes(), stream));
      auto call = [&] {
        if (p.out == Out::Bf16) gemm.gemm(x.as<__nv_bfloat16>(), T, p.k, p.k, w.as<__nv_bfloat16>(), p.rows, y.as<__nv_bfloat16>(), p.rows, stream);
        else gemm.gemm(x.as<__nv_bfloat16>(), T, p.k, p.k, w.as<__nv_bfloat16>(), p.rows, y.as<float>(), p.rows, p.out == Out::F32Accumulate, stream);
      };
      call();
      const double ms = bench::median_ms(call, 7, 3, stream);
      const double flop = 2.0 * static_cast<double>(T) * static_cast<double>(p.k) * static_cast<double>(p.rows);
      const double tflops = flop / (ms * 1e-3) / 1e12;
      total_ms += ms * static_cast<double>(p.per_prefill);
      total_flop += flop * static_cast<double>(p.per_prefill);
      std::printf("| %s | %s | %lld x %lld x %lld | %.0f | %.2f | %.1f (x%lld) |\n", m.c_str(), p.name, static_cast<long long>(T),
                  static_cast<long long>(p.k), static_cast<long long>(p.rows), tflops, tflops / reference, ms * static_cast<double>(p.per_prefill),
                  static_cast<long long>(p.per_prefill));
    }
    std::printf("| %s | all products | | %.0f | %.2f | %.1f |\n", m.c_str(), total_flop / (total_ms * 1e-3) / 1e12,
                total_flop / (total_ms * 1e-3) / 1e12 / reference, total_ms);
  }
  QWENRT_CUDA_CHECK(cudaStreamDestroy(stream));
  return 0;
} catch (const Error& e) {
  std::fprintf(stderr, "cuda_prefill_gemm_bench: %s\n", e.what());
  return 1;
}
