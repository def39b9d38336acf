#pragma once
// Prompt-sized matrix products (more than 64 activation rows) through cuBLAS, loaded at run time
// with dlopen: the engine starts and runs on the CPU where no CUDA libraries are installed, and
// only a CUDA prefill needs libcublas.so. Same contract as skinny_gemm: bf16 x and W, f32 y.
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace qwenrt::cuda {

class CublasGemm {
 public:
  CublasGemm();  // loads the library and creates a handle; Error naming what is missing
  ~CublasGemm();
  CublasGemm(const CublasGemm&) = delete;
  CublasGemm& operator=(const CublasGemm&) = delete;

  // y[b * ldy + r] (+)= Σ_i x[b * ldx + i] · w[r * k + i] for b < n, r < rows.
  void gemm(const __nv_bfloat16* x, int64_t n, int64_t k, int64_t ldx, const __nv_bfloat16* w, int64_t rows, float* y, int64_t ldy, bool accumulate,
            cudaStream_t stream);
  // The same product rounded to bf16 on the way out (no accumulation).
  void gemm(const __nv_bfloat16* x, int64_t n, int64_t k, int64_t ldx, const __nv_bfloat16* w, int64_t rows, __nv_bfloat16* y, int64_t ldy,
            cudaStream_t stream);

 private:
  void run(const __nv_bfloat16* x, int64_t n, int64_t k, int64_t ldx, const __nv_bfloat16* w, int64_t rows, void* y, bool y_bf16, int64_t ldy,
           bool accumulate, cudaStream_t stream);
  struct Api;
  Api* api_ = nullptr;
  void* handle_ = nullptr;
};

// The rate of this path on the current GPU, measured now: TFLOP/s of y = x·Wᵀ with x [m, k] and
// W [n, k] in bf16 and y in f32 (median of several runs on random data). Prefill benchmarks
// report their speed against it.
double cublas_gemm_TFLOPs(int64_t m, int64_t k, int64_t n);

}  // namespace qwenrt::cuda
