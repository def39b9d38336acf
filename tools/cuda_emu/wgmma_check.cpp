// Case 5: the warpgroup-product forms the kernels use, through the emulated wgmma
// (mock/backend/cuda/ptx/wgmma.cuh), by the kernel the GPU test runs (backend/cuda/wgmma_forms_check):
// tiles laid out and named as the H200-proven attention kernel and the DeltaNet state kernel do.
#include <cuda_runtime_api.h>

#include <cstdio>

#include "backend/cuda/diagnostics/wgmma_forms_check.h"

using namespace qwenrt::cuda;

int wgmma_check() {
  WgmmaFormsData d = make_wgmma_forms_data(7);
  WgmmaFormsCheck c;
  c.q = d.q.data(), c.k = d.k.data(), c.v = d.v.data(), c.p = d.p.data();
  c.w = d.w.data(), c.s0 = d.s0.data(), c.dt = d.dt.data(), c.x = d.x.data();
  c.init = d.init.data();
  c.s = d.s.data(), c.o = d.o.data(), c.d1 = d.d1.data(), c.d2 = d.d2.data();
  run_wgmma_forms_check(c, nullptr);
  const WgmmaFormsErrors e = wgmma_forms_errors(d);
  std::printf("[wgmma] rel L2: q·Kᵀ (ss) %.1e, P·V (rs, N-major B) %.1e, W·S₀ (ss, N-major B) %.1e, X·Δ (rs, K-major B) %.1e\n", e.s, e.o, e.d1,
              e.d2);
  int bad = 0;
  for (double x : {e.s, e.o, e.d1, e.d2}) bad += !(x < 1e-6);
  return bad;
}
