// The kernels' warpgroup-product forms run once each on fixed tiles, for a comparison against plain
// products (wgmma_forms_check.h).
#include "backend/cuda/diagnostics/wgmma_forms_check.h"
#include "backend/cuda/ptx/wgmma.cuh"
#include "backend/cuda/runtime/cuda_check.h"

namespace qwenrt::cuda {
namespace {

constexpr int kRows = 64;
constexpr int kThreads = 128;  // one warpgroup
// Tiles, each at a 1024-byte boundary: q, k, v [64][256]; w [64][128]; s0 [128][64]; dt [64][64].
constexpr uint32_t kQ = 0, kK = kQ + kRows * 512, kV = kK + kRows * 512, kW = kV + kRows * 512, kS0 = kW + kRows * 256, kDt = kS0 + 128 * 128,
                   kBytes = kDt + kRows * 128;

// A [rows][cols] bf16 matrix into its swizzled tile at `tile` (bytes into `smem`).
__device__ void put_tile(unsigned char* smem, uint32_t tile, const uint16_t* src, int rows, int cols) {
  for (int e = threadIdx.x; e < rows * cols / 8; e += kThreads) {
    const int r = e / (cols / 8), c = e % (cols / 8);
    *reinterpret_cast<uint4*>(smem + tile + wgmma_tile_offset(rows, r, c)) = *reinterpret_cast<const uint4*>(src + r * cols + 8 * c);
  }
}
__device__ uint32_t pair_at(const uint16_t* m, int ld, int row, int col) {
  return static_cast<uint32_t>(m[row * ld + col]) | static_cast<uint32_t>(m[row * ld + col + 1]) << 16;
}
// mma.sync's A fragment of rows 16w.. at k0 of a row-major bf16 matrix.
__device__ void a_fragment(uint32_t (&a)[4], const uint16_t* m, int ld, int w, int g, int t, int k0) {
  a[0] = pair_at(m, ld, 16 * w + g, k0 + 2 * t);
  a[1] = pair_at(m, ld, 16 * w + g + 8, k0 + 2 * t);
  a[2] = pair_at(m, ld, 16 * w + g, k0 + 2 * t + 8);
  a[3] = pair_at(m, ld, 16 * w + g + 8, k0 + 2 * t + 8);
}
template <int N>
__device__ void store_accumulators(const float (&d)[N], float* out, int ld, int w, int g, int t) {
  for (int j = 0; j < N / 4; ++j)
    for (int i = 0; i < 4; ++i) out[(16 * w + g + 8 * (i / 2)) * ld + 8 * j + 2 * t + i % 2] = d[4 * j + i];
}

__global__ void __launch_bounds__(kThreads) wgmma_forms_kernel(const WgmmaFormsCheck c) {
  extern __shared__ float4 smem_raw[];
  const uint32_t raw = static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw)), base = (raw + 1023) & ~1023u;
  unsigned char* smem = reinterpret_cast<unsigned char*>(smem_raw) + (base - raw);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  put_tile(smem, kQ, c.q, kRows, 256);
  put_tile(smem, kK, c.k, kRows, 256);
  put_tile(smem, kV, c.v, kRows, 256);
  put_tile(smem, kW, c.w, kRows, 128);
  put_tile(smem, kS0, c.s0, 128, 64);
  put_tile(smem, kDt, c.dt, kRows, 64);
  fence_proxy_async_shared();
  __syncthreads();
  // q·Kᵀ, both K-major: step kk reads column block kk/4 of both tiles, 32 bytes further per step
  // inside it (attention_prefill_wgmma.cu).
  float s[32];
  wgmma_fence();
  for (int kk = 0; kk < 16; ++kk) {
    const uint32_t within = (kk % 4) * 32;
    wgmma_64x64_ss(s, wgmma_desc(base + kQ + (kk / 4) * kRows * 128 + within, 16, 1024),
                   wgmma_desc(base + kK + (kk / 4) * kRows * 128 + within, 16, 1024), kk > 0);
  }
  wgmma_commit();
  wgmma_wait<0>();
  wgmma_hold(s);
  store_accumulators(s, c.s, 64, warp, g, t);
  // P·V: A from registers, V N-major, 16 rows (2048 bytes) per step, column blocks 64·128 apart.
  float o[128];
  for (float& x : o) x = 0.0f;
  uint32_t pa[4][4];
  for (int kb = 0; kb < 4; ++kb) a_fragment(pa[kb], c.p, 64, warp, g, t, 16 * kb);
  wgmma_fence();
  for (int kb = 0; kb < 4; ++kb) wgmma_64x256_rs_nmajor(o, pa[kb], wgmma_desc(base + kV + kb * 16 * 128, kRows * 128, 1024), 1);
  wgmma_commit();
  wgmma_wait<0>();
  wgmma_hold(o);
  store_accumulators(o, c.o, 256, warp, g, t);
  // init + W·S₀: W K-major (two column blocks), S₀ N-major (one), as the state kernel's Δ.
  float d1[32];
  for (int j = 0; j < 8; ++j)
    for (int i = 0; i < 4; ++i) d1[4 * j + i] = c.init[(16 * warp + g + 8 * (i / 2)) * 64 + 8 * j + 2 * t + i % 2];
  wgmma_fence();
  for (int kk = 0; kk < 8; ++kk)
    wgmma_64x64_ss_nmajor(d1, wgmma_desc(base + kW + (kk / 4) * kRows * 128 + (kk % 4) * 32, 16, 1024),
                          wgmma_desc(base + kS0 + kk * 16 * 128, 16, 1024), 1);
  wgmma_commit();
  wgmma_wait<0>();
  wgmma_hold(d1);
  store_accumulators(d1, c.d1, 64, warp, g, t);
  // X·Δ with Δᵀ stored K-major, A from registers, as the state kernel's update.
  float d2[32];
  uint32_t xa[4][4];
  for (int ks = 0; ks < 4; ++ks) a_fragment(xa[ks], c.x, 64, warp, g, t, 16 * ks);
  wgmma_fence();
  for (int ks = 0; ks < 4; ++ks) wgmma_64x64_rs(d2, xa[ks], wgmma_desc(base + kDt + ks * 32, 16, 1024), ks > 0);
  wgmma_commit();
  wgmma_wait<0>();
  wgmma_hold(d2);
  store_accumulators(d2, c.d2, 64, warp, g, t);
}

}  // namespace

void run_wgmma_forms_check(const WgmmaFormsCheck& c, cudaStream_t stream) {
  constexpr int kSmem = static_cast<int>(kBytes) + 1024;
  QWENRT_CUDA_CHECK(cudaFuncSetAttribute(wgmma_forms_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
  wgmma_forms_kernel<<<1, kThreads, kSmem, stream>>>(c);
  QWENRT_CUDA_CHECK_LAUNCH();
}

}  // namespace qwenrt::cuda
