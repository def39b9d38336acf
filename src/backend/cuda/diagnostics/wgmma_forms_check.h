#pragma once
// The warpgroup-product forms the kernels use (wgmma.cuh), run once each on fixed tiles laid out
// and named exactly as the kernels lay out and name theirs (wgmma_layout.cuh), for a test against
// plain products: on the GPU (tests/backend/cuda/diagnostics/wgmma_forms_test.cpp) it shows whether the hardware reads
// the tiles as the kernels assume, in tools/cuda_emu (the same source) whether the emulator does.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

namespace qwenrt::cuda {

struct WgmmaFormsCheck {
  // Inputs (device memory), bf16 bits, row-major: q, k, v [64][256]; p [64][64]; w [64][128];
  // s0 [128][64]; dt [64][64]; x [64][64]; init f32 [64][64].
  const uint16_t *q = nullptr, *k = nullptr, *v = nullptr, *p = nullptr, *w = nullptr, *s0 = nullptr, *dt = nullptr, *x = nullptr;
  const float* init = nullptr;
  // Outputs, f32 row-major: s = q·kᵀ [64][64] (the attention's ss form), o = p·v [64][256] (its rs
  // form with N-major B), d1 = init + w·s0 [64][64] (ss with N-major B: the DeltaNet state's Δ),
  // d2 = x·dtᵀ [64][64] (rs with K-major B: the state update).
  float *s = nullptr, *o = nullptr, *d1 = nullptr, *d2 = nullptr;
};

// One block of one warpgroup; the caller checks wgmma_available() first.
void run_wgmma_forms_check(const WgmmaFormsCheck& c, cudaStream_t stream);

// Host side: random bf16 inputs (normal, rounded) and the outputs as they came back.
struct WgmmaFormsData {
  std::vector<uint16_t> q, k, v, p, w, s0, dt, x;
  std::vector<float> init;
  std::vector<float> s, o, d1, d2;  // sized by make_wgmma_forms_data, filled by the caller
};
WgmmaFormsData make_wgmma_forms_data(unsigned seed);
// Relative L2 error of each output against the same products in double.
struct WgmmaFormsErrors {
  double s, o, d1, d2;
};
WgmmaFormsErrors wgmma_forms_errors(const WgmmaFormsData& d);

}  // namespace qwenrt::cuda
