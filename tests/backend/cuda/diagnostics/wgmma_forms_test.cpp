#include <gtest/gtest.h>

#include "backend/cuda/diagnostics/wgmma_forms_check.h"
#include "backend/cuda/gpu_test_support.h"
#include "backend/cuda/runtime/wgmma_probe.h"

namespace qwenrt {
namespace {

// The hardware reads the swizzled tiles and descriptors as the kernels lay them out: each form of
// warpgroup product the kernels use, against the same product in double (f32 accumulation of
// bf16 products: ~1e-7). tools/cuda_emu runs the same kernel to the same bound.
TEST(WgmmaForms, MatchPlainProducts) {
  QWENRT_REQUIRE_GPU();
  if (!cuda::wgmma_available()) GTEST_SKIP() << "no sm_90a code for this GPU";
  cuda::WgmmaFormsData d = cuda::make_wgmma_forms_data(7);
  auto q = test::to_device(d.q), k = test::to_device(d.k), v = test::to_device(d.v), p = test::to_device(d.p);
  auto w = test::to_device(d.w), s0 = test::to_device(d.s0), dt = test::to_device(d.dt), x = test::to_device(d.x);
  auto init = test::to_device(d.init), s = test::to_device(d.s), o = test::to_device(d.o), d1 = test::to_device(d.d1), d2 = test::to_device(d.d2);
  cuda::WgmmaFormsCheck c;
  c.q = q.as<uint16_t>(), c.k = k.as<uint16_t>(), c.v = v.as<uint16_t>(), c.p = p.as<uint16_t>();
  c.w = w.as<uint16_t>(), c.s0 = s0.as<uint16_t>(), c.dt = dt.as<uint16_t>(), c.x = x.as<uint16_t>();
  c.init = init.as<float>();
  c.s = s.as<float>(), c.o = o.as<float>(), c.d1 = d1.as<float>(), c.d2 = d2.as<float>();
  cuda::run_wgmma_forms_check(c, nullptr);
  d.s = test::to_host<float>(s, d.s.size());
  d.o = test::to_host<float>(o, d.o.size());
  d.d1 = test::to_host<float>(d1, d.d1.size());
  d.d2 = test::to_host<float>(d2, d.d2.size());
  const cuda::WgmmaFormsErrors e = cuda::wgmma_forms_errors(d);
  std::printf("[ wgmma forms ] rel L2: q·Kᵀ (ss) %.1e, P·V (rs, N-major B) %.1e, W·S₀ (ss, N-major B) %.1e, X·Δ (rs, K-major B) %.1e\n", e.s, e.o,
              e.d1, e.d2);
  EXPECT_LT(e.s, 1e-6) << "the attention's q·Kᵀ form";
  EXPECT_LT(e.o, 1e-6) << "the attention's P·V form";
  EXPECT_LT(e.d1, 1e-6) << "the DeltaNet state's Δ form (ss, N-major B)";
  EXPECT_LT(e.d2, 1e-6) << "the DeltaNet state's update form (rs, K-major B)";
}

}  // namespace
}  // namespace qwenrt
