// The blocked prompt-window product (matmul_blocked.h). Per thread, over its weight rows:
//
//   for each block of kRowsW weight rows, for each block of kRowsX x rows:
//     partial sums := 0                                  [kRowsX][kRowsW][8] floats, L2
//     for each k-block of kKBlock columns:
//       convert the weight block to f32 panels            kRowsW × kKBlock floats, L1
//       for each 4 x rows, for each 3 weight rows: 12 partial-sum vectors += x · w over the k-block
//         (AVX-512: 8 x rows by 6 weight rows, two weight rows' 8 lanes in one 16-lane register)
//     y := fixed-order lane reduction of each partial sum, then the tail columns
//
// Each (x row, weight row) thus sees exactly the fmas of the row kernels (lane l accumulates
// columns l, l + 8, l + 16, ... in increasing order, starting from +0), the same reduction
// ((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7)) and the same tail fmas: storing a partial sum between
// k-blocks and loading it back is exact. The AVX2 and AVX-512 micro-kernels and the scalar twin do
// the same fmas (AVX-512 holds weight rows j and j + 1 of one x row side by side, lanes 0-7 and
// 8-15, against that x row's 8 columns broadcast to both halves: each output keeps its own 8
// lanes), so every result is bitwise the row kernels' whatever n, the ISA, the block sizes or the
// threads.
#include "backend/cpu/matmul_blocked.h"

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "backend/cpu/lane_sum.h"
#include "backend/cpu/matmul_blocked_driver.h"

namespace qwenrt::cpu {

namespace blocked {

namespace {

constexpr int kTileX = 4;     // x rows per register tile
constexpr int kTileW = 3;     // weight rows per register tile: 12 accumulators + 3 weights + 1 x = 16 ymm
constexpr int kTileX512 = 8;  // AVX-512: 8 x rows by 6 weight rows: 24 accumulators + 3 weight pairs + 1 x = 28 zmm
constexpr int kTileW512 = 6;
constexpr int64_t kRowsW = 48;  // weight rows per block (a multiple of both tiles' widths): panel = 48 × 128 f32 = 24 KB
constexpr int64_t kRowsX = 64;  // x rows per block (a multiple of both tiles' heights): partial sums = 96 KB
static_assert(kRowsW % kTileW == 0 && kRowsW % kTileW512 == 0 && kRowsX % kTileX == 0 && kRowsX % kTileX512 == 0);

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

// The same over pairs of weight rows: zmm p holds rows 2p and 2p + 1 (their panel slices are
// adjacent), the x row's 8 columns broadcast to both halves; an odd last row takes a ymm.
template <int MR, int NR>
__attribute__((target("avx512f,avx512dq,avx512vl,avx2,fma"))) void micro_avx512(const float* x, int64_t ldx, const float* panel, int64_t steps,
                                                                                float* acc, int64_t lda) {
  constexpr int NP = NR / 2;
  constexpr bool kOdd = NR % 2 == 1;
  __m512 a[MR][NP > 0 ? NP : 1];
  __m256 t[MR];
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) {
#pragma GCC unroll 3
    for (int p = 0; p < NP; ++p) a[i][p] = _mm512_loadu_ps(acc + i * lda + p * 16);
    if constexpr (kOdd) t[i] = _mm256_loadu_ps(acc + i * lda + NP * 16);
  }
  for (int64_t s = 0; s < steps; ++s) {
    const float* ws = panel + s * NR * 8;
    __m512 wv[NP > 0 ? NP : 1];
#pragma GCC unroll 3
    for (int p = 0; p < NP; ++p) wv[p] = _mm512_loadu_ps(ws + p * 16);
    __m256 wt = _mm256_setzero_ps();
    if constexpr (kOdd) wt = _mm256_loadu_ps(ws + NP * 16);
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
      const __m256 x8 = _mm256_loadu_ps(x + i * ldx + s * 8);
      const __m512 xv = _mm512_maskz_broadcast_f32x8(0xFFFF, x8);  // (the unmasked form trips GCC 12's -Wuninitialized in its header)
#pragma GCC unroll 3
      for (int p = 0; p < NP; ++p) a[i][p] = _mm512_fmadd_ps(xv, wv[p], a[i][p]);
      if constexpr (kOdd) t[i] = _mm256_fmadd_ps(x8, wt, t[i]);
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) {
#pragma GCC unroll 3
    for (int p = 0; p < NP; ++p) _mm512_storeu_ps(acc + i * lda + p * 16, a[i][p]);
    if constexpr (kOdd) _mm256_storeu_ps(acc + i * lda + NP * 16, t[i]);
  }
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

template <int MR>
constexpr std::array<Micro, kTileW512> avx512_row{micro_avx512<MR, 1>, micro_avx512<MR, 2>, micro_avx512<MR, 3>,
                                                  micro_avx512<MR, 4>, micro_avx512<MR, 5>, micro_avx512<MR, 6>};
constexpr std::array<std::array<Micro, kTileW512>, kTileX512> kMicro512{avx512_row<1>, avx512_row<2>, avx512_row<3>, avx512_row<4>,
                                                                        avx512_row<5>, avx512_row<6>, avx512_row<7>, avx512_row<8>};

// The register tile of an ISA: its shape and micro-kernels by (rows − 1, weight rows − 1).
struct TileSet {
  int tx, tw;
  Micro (*pick)(int mr, int nr);
};
constexpr TileSet kScalarTiles{kTileX, kTileW, [](int mr, int nr) { return kMicro<ScalarTag>[mr - 1][nr - 1]; }};
constexpr TileSet kAvx2Tiles{kTileX, kTileW, [](int mr, int nr) { return kMicro<Avx2Tag>[mr - 1][nr - 1]; }};
constexpr TileSet kAvx512Tiles{kTileX512, kTileW512, [](int mr, int nr) { return kMicro512[mr - 1][nr - 1]; }};

// Per-thread scratch, 64-byte aligned for the panel loads.
float* scratch(std::vector<float>& v, std::size_t floats) {
  if (v.size() < floats + 16) v.resize(floats + 16);
  auto p = reinterpret_cast<std::uintptr_t>(v.data());
  return reinterpret_cast<float*>((p + 63) / 64 * 64);
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
  const TileSet& tiles = !avx2 ? kScalarTiles : have_avx512() ? kAvx512Tiles : kAvx2Tiles;
  const int tx = tiles.tx, tw = tiles.tw;
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
        for (int64_t j = 0; j < nw; j += tw) pack(w, wb + j, static_cast<int>(std::min<int64_t>(tw, nw - j)), kb, kc, panel + j * kc);
        if (kb + kKBlock < k8) prefetch_panel(w, wb, static_cast<int>(nw), kb + kKBlock, std::min(kKBlock, k8 - kb - kKBlock));
        else if (xb + kRowsX >= n && wb + kRowsW < r1)
          prefetch_panel(w, wb + kRowsW, static_cast<int>(std::min(kRowsW, r1 - wb - kRowsW)), 0, std::min(kKBlock, k8));
        for (int64_t i = 0; i < nx; i += tx) {
          const int mr = static_cast<int>(std::min<int64_t>(tx, nx - i));
          for (int64_t j = 0; j < nw; j += tw) {
            const int nr = static_cast<int>(std::min<int64_t>(tw, nw - j));
            tiles.pick(mr, nr)(x + (xb + i) * k + kb, k, panel + j * kc, kc / 8, acc + i * lda + j * 8, lda);
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
