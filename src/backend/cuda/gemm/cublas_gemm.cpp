#include "backend/cuda/gemm/cublas_gemm.h"

#include <dlfcn.h>

#include <algorithm>
#include <cublas_v2.h>
#include <string>
#include <vector>

#include "backend/cuda/diagnostics/device_measure.h"
#include "backend/cuda/runtime/cuda_check.h"
#include "backend/cuda/runtime/device_buffer.h"
#include "core/error.h"

namespace qwenrt::cuda {

// The few entry points qwenrt uses, resolved from the shared library.
struct CublasGemm::Api {
  void* lib = nullptr;
  decltype(&cublasCreate_v2) create = nullptr;
  decltype(&cublasDestroy_v2) destroy = nullptr;
  decltype(&cublasSetStream_v2) set_stream = nullptr;
  // Spelled out: the C++ header overloads cublasGemmEx.
  cublasStatus_t (*gemm_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*, const void*, cudaDataType, int,
                            const void*, cudaDataType, int, const void*, void*, cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t) = nullptr;
};

namespace {

template <typename F>
void resolve(void* lib, const char* name, F& fn) {
  fn = reinterpret_cast<F>(dlsym(lib, name));
  if (!fn) fail("libcublas has no symbol ", name, ": the CUDA toolkit's cuBLAS 13 is needed for prompts longer than 64 rows");
}

void check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) fail("cuBLAS ", what, " failed with status ", static_cast<int>(s));
}

}  // namespace

CublasGemm::CublasGemm() : api_(new Api) {
  for (const char* name : {"libcublas.so.13", "libcublas.so"}) {
    api_->lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (api_->lib) break;
  }
  if (!api_->lib) {
    delete api_;
    fail("cannot load libcublas.so.13 (", dlerror(),
         "): the CUDA toolkit's cuBLAS is needed for CUDA prefill; "
         "add its lib64 folder to LD_LIBRARY_PATH");
  }
  try {
    resolve(api_->lib, "cublasCreate_v2", api_->create);
    resolve(api_->lib, "cublasDestroy_v2", api_->destroy);
    resolve(api_->lib, "cublasSetStream_v2", api_->set_stream);
    resolve(api_->lib, "cublasGemmEx", api_->gemm_ex);
    cublasHandle_t h = nullptr;
    check(api_->create(&h), "create");
    handle_ = h;
  } catch (...) {
    dlclose(api_->lib);
    delete api_;
    throw;
  }
}

CublasGemm::~CublasGemm() {
  if (handle_) api_->destroy(static_cast<cublasHandle_t>(handle_));
  // The library stays loaded: CUDA's own teardown at exit may still reference it.
  delete api_;
}

void CublasGemm::run(const __nv_bfloat16* x, int64_t n, int64_t k, int64_t ldx, const __nv_bfloat16* w, int64_t rows, void* y, bool y_bf16,
                     int64_t ldy, bool accumulate, cudaStream_t stream) {
  // Column-major view: y (rows × n, ld ldy) = Wᵀ-op (rows × k) · x (k × n).
  const float one = 1.0f, beta = accumulate ? 1.0f : 0.0f;
  const auto h = static_cast<cublasHandle_t>(handle_);
  check(api_->set_stream(h, stream), "set stream");
  check(api_->gemm_ex(h, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(rows), static_cast<int>(n), static_cast<int>(k), &one, w, CUDA_R_16BF,
                      static_cast<int>(k), x, CUDA_R_16BF, static_cast<int>(ldx), &beta, y, y_bf16 ? CUDA_R_16BF : CUDA_R_32F, static_cast<int>(ldy),
                      CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
        "GemmEx");
}

void CublasGemm::gemm(const __nv_bfloat16* x, int64_t n, int64_t k, int64_t ldx, const __nv_bfloat16* w, int64_t rows, float* y, int64_t ldy,
                      bool accumulate, cudaStream_t stream) {
  run(x, n, k, ldx, w, rows, y, false, ldy, accumulate, stream);
}

void CublasGemm::gemm(const __nv_bfloat16* x, int64_t n, int64_t k, int64_t ldx, const __nv_bfloat16* w, int64_t rows, __nv_bfloat16* y, int64_t ldy,
                      cudaStream_t stream) {
  run(x, n, k, ldx, w, rows, y, true, ldy, false, stream);
}

double cublas_gemm_TFLOPs(int64_t m, int64_t k, int64_t n) {
  CublasGemm gemm;
  DeviceBuffer x(static_cast<std::size_t>(m * k) * 2), w(static_cast<std::size_t>(n * k) * 2), y(static_cast<std::size_t>(m * n) * 4);
  cudaStream_t s;
  QWENRT_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  fill_uniform_bf16(x.as<__nv_bfloat16>(), static_cast<std::size_t>(m * k), 1.0f, 1, s);
  fill_uniform_bf16(w.as<__nv_bfloat16>(), static_cast<std::size_t>(n * k), 0.02f, 2, s);
  cudaEvent_t e0, e1;
  QWENRT_CUDA_CHECK(cudaEventCreate(&e0));
  QWENRT_CUDA_CHECK(cudaEventCreate(&e1));
  std::vector<float> ms;
  for (int i = 0; i < 8; ++i) {
    QWENRT_CUDA_CHECK(cudaEventRecord(e0, s));
    gemm.gemm(x.as<__nv_bfloat16>(), m, k, k, w.as<__nv_bfloat16>(), n, y.as<float>(), n, false, s);
    QWENRT_CUDA_CHECK(cudaEventRecord(e1, s));
    QWENRT_CUDA_CHECK(cudaEventSynchronize(e1));
    float t = 0;
    QWENRT_CUDA_CHECK(cudaEventElapsedTime(&t, e0, e1));
    if (i > 0) ms.push_back(t);  // the first run loads kernels
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  cudaStreamDestroy(s);
  std::sort(ms.begin(), ms.end());
  return 2.0 * static_cast<double>(m) * static_cast<double>(k) * static_cast<double>(n) / (ms[ms.size() / 2] * 1e-3) / 1e12;
}

}  // namespace qwenrt::cuda
