// The blocked prompt-window product (matmul_blocked.h). Per thread, over its weight rows:
//
//   for each block of kRowsW weight rows, for each block of kRowsX x rows:
//     partial sums := 0                                  [kRowsX][kRowsW][8] floats, L2
//     for each k-block of kKBlock columns:
//       convert the weight block to f32 panels            kRowsW × kKBlock floats, L1
//       for each 4 x rows, for each 3 weight rows: 12 partial-sum vectors += x · w over the k-block
//     y := fixed-order lane reduction of each partial sum, then the tail columns
//
// Each (x row, weight row) thus sees exactly the fmas of the row kernels (lane l accumulates
// columns l, l + 8, l + 16, ... in increasing order, starting from +0), the same reduction
// ((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7)) and the same tail fmas: storing a partial sum between
// k-blocks and loading it back is exact. The AVX2 micro-kernel and the scalar twin do the same
// fmas, so every result is bitwise the row kernels' whatever n, the block sizes or the threads.
#include "backend/cpu/matmul_blocked.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "backend/cpu/lane_sum.h"
#include "backend/cpu/matmul_blocked_driver.h"

namespace qwenrt::cpu {

namespace blocked {

namespace {

constexpr int kTileX = 4;       // x rows per register tile
constexpr int kTileW = 3;       // weight rows per register tile: 12 accumulators + 3 weights + 1 x = 16 ymm
constexpr int64_t kRowsW = 48;  // weight rows per block (a multiple of kTileW): panel = 48 × 128 f32 = 24 KB
constexpr int64_t kRowsX = 64;  // x rows per block (a multiple of kTileX): partial sums = 96 KB

// acc[i * lda + j * 8 + l] += Σ_s x[i][s·8 + l] · panel[s][j][l], s in k order.
using Micro = void (*)(const float* x, int64_t ldx, const float* panel, int64_t steps, float* acc, int64_t lda);

// The accumulators must live in registers: every loop over the tile is unrolled explicitly
// (GCC at -O2 keeps a[][] in memory otherwise).
template <int MR, int NR>
__attribute__((target("avx2,fma"))) void micro_avx2(const float* x, int64_t ldx, const float* panel, int64_t steps, float* acc, int64_t lda) {
  __m256 a[MR][NR];
#pragma GCC unroll 4
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 3
    for (int j = 0; j < NR; ++j) a[i][j] = _mm256_loadu_ps(acc + i * lda + j * 8);
  for (int64_t s = 0; s < steps; ++s) {
    __m256 wv[NR];
#pragma GCC unroll 3
    for (int j = 0; j < NR; ++j) wv[j] = _mm256_load_ps(panel + (s * NR + j) * 8);
#pragma GCC unroll 4
    for (int i = 0; i < MR; ++i) {
      const __m256 xv = _mm256_loadu_ps(x + i * ldx + s * 8);
#pragma GCC unroll 3
      for (int j = 0; j < NR; ++j) a[i][j] = _mm256_fmadd_ps(xv, wv[j], a[i][j]);
    }
  }
#pragma GCC unroll 4
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 3
    for (int j = 0; j < NR; ++j) _mm256_storeu_ps(acc + i * lda + j * 8, a[i][j]);
}

template <int MR, int NR>
void micro_scalar(const float* x, int64_t ldx, const float* panel, int64_t steps, float* acc, int64_t lda) {
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) {
      float* a = acc + i * lda + j * 8;
      for (int64_t s = 0; s < steps; ++s)
        for (int l = 0; l < 8; ++l) a[l] = std::fma(x[i * ldx + s * 8 + l], panel[(s * NR + j) * 8 + l], a[l]);
    }
}

template <int MR, int NR>
struct Avx2Tag {
  static constexpr Micro fn = micro_avx2<MR, NR>;
};
template <int MR, int NR>
struct ScalarTag {
  static constexpr Micro fn = micro_scalar<MR, NR>;
};

template <template <int, int> class T>
constexpr Micro kMicro[kTileX][kTileW] = {{T<1, 1>::fn, T<1, 2>::fn, T<1, 3>::fn},
                                          {T<2, 1>::fn, T<2, 2>::fn, T<2, 3>::fn},
                                          {T<3, 1>::fn, T<3, 2>::fn, T<3, 3>::fn},
                                          {T<4, 1>::fn, T<4, 2>::fn, T<4, 3>::fn}};

// Per-thread scratch, 32-byte aligned for the panel loads.
float* scratch(std::vector<float>& v, std::size_t floats) {
  if (v.size() < floats + 8) v.resize(floats + 8);
  auto p = reinterpret_cast<std::uintptr_t>(v.data());
  return reinterpret_cast<float*>((p + 31) / 32 * 32);
}

// Asks for weight rows [r, r + nr) × columns [c0, c0 + kc) (their data bytes; for MLX affine the
// small scale and bias rows are left to the hardware) to come into the caches. A block's 48 rows
// read 128 columns at a time are more streams than the hardware prefetcher follows, so the next
// panel is asked for while this one's products run.
void prefetch_panel(const Weight& w, int64_t r, int nr, int64_t c0, int64_t kc) {
  const std::size_t rb = w.row_bytes(), cols = static_cast<std::size_t>(w.cols);
  const std::size_t b0 = static_cast<std::size_t>(c0) * rb / cols, b1 = static_cast<std::size_t>(c0 + kc) * rb / cols;
  for (int j = 0; j < nr; ++j) {
    const std::byte* p = w.data + static_cast<std::size_t>(r + j) * rb;
    for (std::size_t b = b0; b < b1; b += 64) __builtin_prefetch(p + b, 0, 3);
    __builtin_prefetch(p + b1 - 1, 0, 3);
  }
}

}  // namespace

void run(PackPanel pack, LoadElement tail, bool avx2, const float* x, int64_t n, int64_t k, const Weight& w, float* y, int64_t ldy, int64_t r0,
         int64_t r1) {
  const auto& micro = avx2 ? kMicro<Avx2Tag> : kMicro<ScalarTag>;
  const int64_t k8 = k / 8 * 8;
  thread_local std::vector<float> panel_store, acc_store;
  float* panel = scratch(panel_store, static_cast<std::size_t>(kRowsW * kKBlock));
  float* acc = scratch(acc_store, static_cast<std::size_t>(kRowsX * kRowsW * 8));
  constexpr int64_t lda = kRowsW * 8;
  for (int64_t wb = r0; wb < r1; wb += kRowsW) {
    const int64_t nw = std::min(kRowsW, r1 - wb);
    for (int64_t xb = 0; xb < n; xb += kRowsX) {
      const int64_t nx = std::min(kRowsX, n - xb);
      for (int64_t i = 0; i < nx; ++i) std::fill_n(acc + i * lda, nw * 8, 0.0f);
      for (int64_t kb = 0; kb < k8; kb += kKBlock) {
        const int64_t kc = std::min(kKBlock, k8 - kb);
        for (int64_t j = 0; j < nw; j += kTileW) pack(w, wb + j, static_cast<int>(std::min<int64_t>(kTileW, nw - j)), kb, kc, panel + j * kc);
        if (kb + kKBlock < k8) prefetch_panel(w, wb, static_cast<int>(nw), kb + kKBlock, std::min(kKBlock, k8 - kb - kKBlock));
        else if (xb + kRowsX >= n && wb + kRowsW < r1)
          prefetch_panel(w, wb + kRowsW, static_cast<int>(std::min(kRowsW, r1 - wb - kRowsW)), 0, std::min(kKBlock, k8));
        for (int64_t i = 0; i < nx; i += kTileX) {
          const int mr = static_cast<int>(std::min<int64_t>(kTileX, nx - i));
          for (int64_t j = 0; j < nw; j += kTileW) {
            const int nr = static_cast<int>(std::min<int64_t>(kTileW, nw - j));
            micro[mr - 1][nr - 1](x + (xb + i) * k + kb, k, panel + j * kc, kc / 8, acc + i * lda + j * 8, lda);
          }
        }
      }
      for (int64_t i = 0; i < nx; ++i) {
        const float* xr = x + (xb + i) * k;
        for (int64_t j = 0; j < nw; ++j) {
          float s = reduce_lanes(acc + i * lda + j * 8);
          for (int64_t c = k8; c < k; ++c) s = std::fma(xr[c], tail(w, wb + j, c), s);
          y[(xb + i) * ldy + wb + j] = s;
        }
      }
    }
  }
}

}  // namespace blocked

RowKernel blocked_kernel(const Weight& w) {
  switch (w.format) {
    case WeightFormat::F32:
    case WeightFormat::F16:
    case WeightFormat::BF16: return dense_rows_blocked;
    case WeightFormat::MlxAffine: return mlx_affine_rows_blocked;
    case WeightFormat::Fp8Block: return fp8_block_rows_blocked;
    default: return nullptr;
  }
}

}  // namespace qwenrt::cpu
