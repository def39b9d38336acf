// Checks the emulated wgmma (mock/backend/cuda/wgmma.cuh) against plain products: tiles laid out
// and named by descriptors exactly as attention_prefill_wgmma.cu does (proven on the H200), and as
// the DeltaNet state kernel does with the other two forms.
#include <cuda_runtime_api.h>
#include "backend/cuda/wgmma.cuh"
#include <cmath>
#include <random>
#include <vector>

using namespace qwenrt::cuda;
namespace {
constexpr int kRows = 64;
struct Data {
  std::vector<uint16_t> q, k, v, p;   // [64][256] x3, P [64][64]
  std::vector<uint16_t> w, s0, dt;    // W [64][128], S₀ [128][64], Δᵀ [64][64]
  std::vector<uint16_t> x;            // A of the 64x32 product, [64][64]
  std::vector<float> init;            // accumulators' starting values, [64][64]
  std::vector<float> s, o, d1, d2;    // results: [64][64], [64][256], [64][64], [64][64]
};
void put_tile(uint32_t at, const uint16_t* src, int rows, int cols) {
  const int tid = emu::me().tid;
  for (int e = tid; e < rows * cols / 8; e += 128) {
    const int r = e / (cols / 8), c = e % (cols / 8);
    std::memcpy(emu_smem(at + wgmma_tile_offset(rows, r, c), 16), src + r * cols + 8 * c, 16);
  }
}
uint32_t frag(const uint16_t* m, int ld, int row, int col) { return uint32_t(m[row * ld + col]) | uint32_t(m[row * ld + col + 1]) << 16; }
// A fragment of rows 16w.. at k0 from a row-major bf16 matrix.
void a_frag(uint32_t (&a)[4], const uint16_t* m, int ld, int w, int g, int t, int k0) {
  a[0] = frag(m, ld, 16 * w + g, k0 + 2 * t);
  a[1] = frag(m, ld, 16 * w + g + 8, k0 + 2 * t);
  a[2] = frag(m, ld, 16 * w + g, k0 + 2 * t + 8);
  a[3] = frag(m, ld, 16 * w + g + 8, k0 + 2 * t + 8);
}
template <int N>
void store(const float (&d)[N], float* out, int ld, int w, int g, int t) {
  for (int j = 0; j < N / 4; ++j)
    for (int i = 0; i < 4; ++i) out[(16 * w + g + 8 * (i / 2)) * ld + 8 * j + 2 * t + i % 2] = d[4 * j + i];
}
void check_kernel(Data* D) {
  const int tid = emu::me().tid, w = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  const uint32_t q = 0, k = q + 64 * 512, v = k + 64 * 512, wt = v + 64 * 512, s0 = wt + 64 * 256, dt = s0 + 128 * 128;
  put_tile(q, D->q.data(), kRows, 256);
  put_tile(k, D->k.data(), kRows, 256);
  put_tile(v, D->v.data(), kRows, 256);
  put_tile(wt, D->w.data(), kRows, 128);
  put_tile(s0, D->s0.data(), 128, 64);
  put_tile(dt, D->dt.data(), kRows, 64);
  __syncthreads();
  // Attention's S = q·Kᵀ: step kk reads column block kk/4 of both tiles, 32 bytes further per step.
  float s[32];
  wgmma_fence();
  for (int kk = 0; kk < 16; ++kk) {
    const uint32_t within = (kk % 4) * 32;
    wgmma_64x64_ss(s, wgmma_desc(q + (kk / 4) * kRows * 128 + within, 16, 1024), wgmma_desc(k + (kk / 4) * kRows * 128 + within, 16, 1024), kk > 0);
  }
  wgmma_commit();
  wgmma_wait<0>();
  store(s, D->s.data(), 64, w, g, t);
  // Attention's O = P·V: A from registers, V N-major, 16 key rows (2048 bytes) per step.
  float o[128] = {};
  wgmma_fence();
  for (int kb = 0; kb < 4; ++kb) {
    uint32_t a[4];
    a_frag(a, D->p.data(), 64, w, g, t, 16 * kb);
    wgmma_64x256_rs_nmajor(o, a, wgmma_desc(v + kb * 16 * 128, kRows * 128, 1024), 1);
  }
  wgmma_commit();
  wgmma_wait<0>();
  store(o, D->o.data(), 256, w, g, t);
  // The state kernel's Δ: init + W·S₀, W K-major (two column blocks), S₀ N-major (one).
  float d1[32];
  for (int j = 0; j < 8; ++j)
    for (int i = 0; i < 4; ++i) d1[4 * j + i] = D->init[(16 * w + g + 8 * (i / 2)) * 64 + 8 * j + 2 * t + i % 2];
  wgmma_fence();
  for (int kk = 0; kk < 8; ++kk)
    wgmma_64x64_ss_nmajor(d1, wgmma_desc(wt + (kk / 4) * kRows * 128 + (kk % 4) * 32, 16, 1024), wgmma_desc(s0 + kk * 16 * 128, 16, 1024), 1);
  wgmma_commit();
  wgmma_wait<0>();
  store(d1, D->d1.data(), 64, w, g, t);
  // The state update's product: X (registers) · Δ, Δᵀ stored K-major.
  float d2[32];
  wgmma_fence();
  for (int ks = 0; ks < 4; ++ks) {
    uint32_t a[4];
    a_frag(a, D->x.data(), 64, w, g, t, 16 * ks);
    wgmma_64x64_rs(d2, a, wgmma_desc(dt + ks * 32, 16, 1024), ks > 0);
  }
  wgmma_commit();
  wgmma_wait<0>();
  store(d2, D->d2.data(), 64, w, g, t);
}
uint16_t random_bf16(std::mt19937& rng) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  return emu_f2bf(nd(rng));
}
double rel(const std::vector<float>& got, const std::vector<double>& want) {
  double e = 0, n = 0;
  for (std::size_t i = 0; i < got.size(); ++i) e += (got[i] - want[i]) * (got[i] - want[i]), n += want[i] * want[i];
  return std::sqrt(e / n);
}
}  // namespace

int wgmma_check() {
  std::mt19937 rng(7);
  Data D;
  auto fill = [&](std::vector<uint16_t>& m, std::size_t n) { m.resize(n); for (auto& x : m) x = random_bf16(rng); };
  fill(D.q, 64 * 256); fill(D.k, 64 * 256); fill(D.v, 64 * 256); fill(D.p, 64 * 64);
  fill(D.w, 64 * 128); fill(D.s0, 128 * 64); fill(D.dt, 64 * 64); fill(D.x, 64 * 64);
  D.init.resize(64 * 64);
  for (auto& x : D.init) x = emu_bf2f(random_bf16(rng));
  D.s.resize(64 * 64); D.o.resize(64 * 256); D.d1.resize(64 * 64); D.d2.resize(64 * 64);
  emu::launch(check_kernel, dim3(1), dim3(128), 64 * 512 * 3 + 64 * 256 + 128 * 128 + 64 * 128, &D);
  auto f = [](uint16_t b) { return static_cast<double>(emu_bf2f(b)); };
  std::vector<double> s(64 * 64), o(64 * 256), d1(64 * 64), d2(64 * 64);
  for (int r = 0; r < 64; ++r) {
    for (int c = 0; c < 64; ++c) {
      double a = 0, b = D.init[r * 64 + c];
      for (int i = 0; i < 256; ++i) a += f(D.q[r * 256 + i]) * f(D.k[c * 256 + i]);
      for (int i = 0; i < 128; ++i) b += f(D.w[r * 128 + i]) * f(D.s0[i * 64 + c]);
      s[r * 64 + c] = a;
      d1[r * 64 + c] = b;
    }
    for (int c = 0; c < 256; ++c) {
      double a = 0;
      for (int i = 0; i < 64; ++i) a += f(D.p[r * 64 + i]) * f(D.v[i * 256 + c]);
      o[r * 256 + c] = a;
    }
    for (int c = 0; c < 64; ++c) {
      double a = 0;
      for (int i = 0; i < 64; ++i) a += f(D.x[r * 64 + i]) * f(D.dt[c * 64 + i]);
      d2[r * 64 + c] = a;
    }
  }
  const double e[4] = {rel(D.s, s), rel(D.o, o), rel(D.d1, d1), rel(D.d2, d2)};
  std::printf("[wgmma] rel L2: q·Kᵀ (ss) %.1e, P·V (rs, N-major) %.1e, W·S₀ (ss, N-major B) %.1e, X·Δ (rs, K-major B) %.1e\n", e[0], e[1], e[2], e[3]);
  int bad = 0;
  for (double x : e) bad += !(x < 1e-6);
  return bad;
}
