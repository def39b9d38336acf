// moe_window: the experts of a prompt window (or a large decode batch) as grouped GEMMs.
//
// 1. moe_group (moe_group.h): the (row, slot) pairs grouped by expert, each expert's run padded to
//    the GEMM's row tile (the places' order within a run varies; a tensor-core product's output row
//    depends on its own input row only).
// 2. gate/up: act[place] = bf16(silu(x[row]·Gᵀ) ⊙ (x[row]·Uᵀ)) for all tiles of all experts in one
//    launch (mma.sync m16n8k16, cp.async pipeline; a tile's weight rows are gate rows and the up
//    rows of the same FFN columns, half and half, so SwiGLU happens in the epilogue).
// 3. down: out[place] = act[place]·Dᵀ, f32.
// 4. moe_gather: y[row] (+)= Σ_slot w[row, slot] · out[place(row, slot)], slots in order.
#include <algorithm>

#include "backend/cuda/moe/grouped_tile.cuh"
#include "backend/cuda/moe/moe.h"
#include "backend/cuda/moe/moe_group.h"
#include "backend/cuda/moe/moe_grouped_wgmma.h"
#include "backend/cuda/ptx/gate_math.cuh"
#include "backend/cuda/ptx/mma.cuh"
#include "backend/cuda/runtime/chained_launch.h"
#include "backend/cuda/runtime/cuda_check.h"
#include "core/error.h"

namespace qwenrt::cuda {
namespace {

using bf16 = __nv_bfloat16;

constexpr int BK = 32;   // K per pipeline stage
constexpr int kPad = 8;  // bf16 of padding per shared row: ldmatrix's eight row addresses hit distinct banks
constexpr int kLd = BK + kPad;
// A tile of BM rows (32, 64 or 128) by BN weight rows (128 or 256): warps of WM rows (32 or 64) x
// 64 weight rows, BM/WM along the rows and BN/64 along the weight rows. Larger tiles read fewer
// bytes per product (a 64x128 tile 43 products per element loaded, 128x256 85) and larger warps
// fewer fragments from shared memory; the small tiles waste less on the padding of experts that
// get few rows.
template <int BM, int BN, int WM = 32>
struct Tile {
  static constexpr int kWarpsM = BM / WM, kWarpsN = BN / 64;
  static constexpr int kFragsM = WM / 16;  // m16 fragments of a warp's rows
  static constexpr int kThreads = kWarpsM * kWarpsN * 32;
  static constexpr int kStages = BM >= 128 ? 4 : 3;
  static constexpr int kAPieces = BM * (BK / 8) / kThreads, kBPieces = BN * (BK / 8) / kThreads;  // 16-byte copies per thread and stage
  static constexpr std::size_t kSmem = sizeof(bf16) * kStages * (BM + BN) * kLd;
  static_assert(kAPieces >= 1 && kBPieces >= 1 && kThreads <= 1024);
};

// Tile rows from the rows the routed experts get on average: 32 below 32 (decode batches of 9 to
// ~1000 rows on 35B-A3B), 64 below 128, else 128 (prompt windows of some 4k rows and more).
int tile_rows(int64_t rows, const MoeExperts& ex) {
  const int64_t pairs = rows * ex.top_k, experts = ex.experts;
  return pairs < 32 * experts ? 32 : pairs < 128 * experts ? 64 : 128;
}

struct Layout {
  int BM;  // tile rows
  int64_t pairs, groups, tiles, places;
  std::size_t sorted, place, tile_expert, act, out, total;  // byte offsets in the scratch
};
std::size_t align16(std::size_t n) { return (n + 15) / 16 * 16; }
Layout layout(int64_t rows, const MoeExperts& ex) {
  Layout l{};
  l.BM = tile_rows(rows, ex);
  l.pairs = rows * ex.slots;
  l.groups = ex.experts + (ex.shared ? 1 : 0);
  l.tiles = moe_group_max_tiles(l.pairs, l.groups, l.BM);
  l.places = l.tiles * l.BM;
  std::size_t at = 0;
  auto take = [&](std::size_t bytes) {
    const std::size_t o = at;
    at += align16(bytes);
    return o;
  };
  l.sorted = take(static_cast<std::size_t>(l.places) * 4);
  l.place = take(static_cast<std::size_t>(l.pairs) * 4);
  l.tile_expert = take(static_cast<std::size_t>(l.tiles) * 4);
  l.act = take(static_cast<std::size_t>(l.places * ex.inter) * sizeof(bf16));
  l.out = take(static_cast<std::size_t>(l.places * ex.hidden) * sizeof(float));
  l.total = at;
  return l;
}

// One tile: rows [tile·BM, +BM) of the places (all of one expert), weight rows [n0, +BN) of that
// expert's matrix as the mode maps them. kGateUp: x rows gathered through `sorted`, K = H, weights
// gate_up (tile rows 0-63: gate rows n0/2.., 64-127: up rows), act out; else act rows, K = I,
// weights down, f32 out.
template <int BM, int BN, int WM, bool kGateUp>
__global__ void __launch_bounds__(Tile<BM, BN, WM>::kThreads)
    moe_grouped_gemm_kernel(const bf16* a, int64_t lda, const int32_t* sorted, const int32_t* tile_expert, MoeExperts ex, void* out) {
  chained_kernel_start();
  const grouped_tile::Place place = grouped_tile::place_of<BM, BN, kGateUp>(tile_expert, ex);
  if (place.e < 0) return;
  const auto [e, H, I, K, N, n0, p0, w] = place;

  extern __shared__ float4 smem_raw[];
  using T = Tile<BM, BN, WM>;
  constexpr int kStages = T::kStages, kFragsM = T::kFragsM;
  auto& As = *reinterpret_cast<bf16(*)[kStages][BM][kLd]>(smem_raw);
  auto& Bs = *reinterpret_cast<bf16(*)[kStages][BN][kLd]>(reinterpret_cast<unsigned char*>(smem_raw) + sizeof(bf16) * kStages * BM * kLd);

  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  constexpr int kThreads = T::kThreads, kAPieces = T::kAPieces, kBPieces = T::kBPieces;
  const int wm = warp % T::kWarpsM, wn = warp / T::kWarpsM;

  // What this thread copies each stage: pieces of 16 bytes (8 bf16 along K) of A and B rows.
  const bf16* a_src[kAPieces];
  bool a_ok[kAPieces];
  int a_row[kAPieces], a_piece[kAPieces];
#pragma unroll
  for (int i = 0; i < kAPieces; ++i) {
    const int idx = tid + i * kThreads;  // BM rows x 4 pieces
    a_row[i] = idx / 4, a_piece[i] = idx % 4;
    a_src[i] = grouped_tile::a_row<kGateUp>(place, a, lda, sorted, a_row[i], a_ok[i]);
  }
  const bf16* b_src[kBPieces];
  bool b_ok[kBPieces];
  int b_row[kBPieces], b_piece[kBPieces];
#pragma unroll
  for (int i = 0; i < kBPieces; ++i) {
    const int idx = tid + i * kThreads;  // BN rows x 4 pieces
    b_row[i] = idx / 4, b_piece[i] = idx % 4;
    b_ok[i] = grouped_tile::output_column<BN, kGateUp>(place, b_row[i]) < N;
    b_src[i] = w + (b_ok[i] ? grouped_tile::weight_row<BN, kGateUp>(place, b_row[i]) : 0) * K;
  }
  const int64_t k_tiles = (K + BK - 1) / BK;
  auto load_stage = [&](int stage, int64_t kt) {
    const int64_t k0 = kt * BK;
#pragma unroll
    for (int i = 0; i < kAPieces; ++i) {
      const int64_t k = k0 + a_piece[i] * 8;
      const bool ok = a_ok[i] && k < K;
      cp_async16(static_cast<uint32_t>(__cvta_generic_to_shared(&As[stage][a_row[i]][a_piece[i] * 8])), a_src[i] + (ok ? k : 0), ok);
    }
#pragma unroll
    for (int i = 0; i < kBPieces; ++i) {
      const int64_t k = k0 + b_piece[i] * 8;
      const bool ok = b_ok[i] && k < K;
      cp_async16(static_cast<uint32_t>(__cvta_generic_to_shared(&Bs[stage][b_row[i]][b_piece[i] * 8])), b_src[i] + (ok ? k : 0), ok);
    }
  };

  float acc[kFragsM][8][4] = {};
  // The weight rows of this warp's eight n8 tiles: gate/up pairs (q, q + 4) for the SwiGLU epilogue.
  auto b_base = [&](int q) { return kGateUp ? (q < 4 ? wn * 32 + q * 8 : BN / 2 + wn * 32 + (q - 4) * 8) : wn * 64 + q * 8; };

#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < k_tiles) load_stage(s, s);
    cp_async_commit();
  }
  for (int64_t kt = 0; kt < k_tiles; ++kt) {
    cp_async_wait<kStages - 2>();
    __syncthreads();
    {
      const int64_t next = kt + kStages - 1;
      if (next < k_tiles) load_stage(static_cast<int>(next % kStages), next);
      cp_async_commit();
    }
    const int st = static_cast<int>(kt % kStages);
#pragma unroll
    for (int kk = 0; kk < BK / 16; ++kk) {
      uint32_t af[kFragsM][4];
#pragma unroll
      for (int mi = 0; mi < kFragsM; ++mi) {
        const int r = wm * WM + mi * 16 + (lane % 8) + ((lane / 8) % 2) * 8;
        const int c = kk * 16 + (lane / 16) * 8;
        ldmatrix_x4(af[mi], static_cast<uint32_t>(__cvta_generic_to_shared(&As[st][r][c])));
      }
#pragma unroll
      for (int q = 0; q < 8; q += 2) {
        uint32_t bf[4];
        const int r = b_base(q) + (lane % 8) + (lane / 16) * 8;
        const int c = kk * 16 + ((lane / 8) % 2) * 8;
        ldmatrix_x4(bf, static_cast<uint32_t>(__cvta_generic_to_shared(&Bs[st][r][c])));
#pragma unroll
        for (int mi = 0; mi < kFragsM; ++mi) {
          mma_bf16_16816(acc[mi][q], af[mi][0], af[mi][1], af[mi][2], af[mi][3], bf[0], bf[1]);
          mma_bf16_16816(acc[mi][q + 1], af[mi][0], af[mi][1], af[mi][2], af[mi][3], bf[2], bf[3]);
        }
      }
    }
  }
  cp_async_wait<0>();

  const int g = lane / 4, t = lane % 4;
#pragma unroll
  for (int mi = 0; mi < kFragsM; ++mi) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int64_t p = p0 + wm * WM + mi * 16 + g + half * 8;
      if (kGateUp) {
#pragma unroll
        for (int q = 0; q < 4; ++q) {
          const int64_t c = n0 + wn * 32 + q * 8 + 2 * t;
          if (c < N) grouped_tile::store_swiglu(place, out, p, c, &acc[mi][q][half * 2], &acc[mi][q + 4][half * 2]);
        }
      } else {
        if (sorted[p] < 0) continue;
#pragma unroll
        for (int q = 0; q < 8; ++q) {
          const int64_t c = n0 + wn * 64 + q * 8 + 2 * t;
          if (c < N) grouped_tile::store_down(place, out, p, c, &acc[mi][q][half * 2]);
        }
      }
    }
  }
}

// gate/up (with SwiGLU) into act, then down into out, over all experts' tiles.
template <int BM, int BN, int WM = 32>
void grouped_gemms(const bf16* x, int64_t ldx, int64_t tiles, const MoeExperts& ex, const int32_t* sorted, const int32_t* tile_expert, bf16* act,
                   float* out, cudaStream_t stream) {
  constexpr int kThreads = Tile<BM, BN, WM>::kThreads;
  constexpr std::size_t kSmem = Tile<BM, BN, WM>::kSmem;
  constexpr auto* gate_up = moe_grouped_gemm_kernel<BM, BN, WM, true>;
  constexpr auto* down = moe_grouped_gemm_kernel<BM, BN, WM, false>;
  if constexpr (kSmem > 48 * 1024) {
    static const bool opted_in = [&] {
      QWENRT_CUDA_CHECK(cudaFuncSetAttribute(gate_up, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kSmem)));
      QWENRT_CUDA_CHECK(cudaFuncSetAttribute(down, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kSmem)));
      return true;
    }();
    (void)opted_in;
  }
  const dim3 gu_grid(static_cast<unsigned>(tiles), static_cast<unsigned>((ex.inter + BN / 2 - 1) / (BN / 2)));
  launch_chained(gate_up, gu_grid, dim3(kThreads), kSmem, stream, x, ldx, sorted, tile_expert, ex, static_cast<void*>(act));
  QWENRT_CUDA_CHECK_LAUNCH();
  const dim3 down_grid(static_cast<unsigned>(tiles), static_cast<unsigned>((ex.hidden + BN - 1) / BN));
  launch_chained(down, down_grid, dim3(kThreads), kSmem, stream, static_cast<const bf16*>(act), ex.inter, sorted, tile_expert, ex,
                 static_cast<void*>(out));
  QWENRT_CUDA_CHECK_LAUNCH();
}

}  // namespace

std::size_t moe_window_scratch_bytes(int64_t rows, const MoeExperts& ex) { return layout(rows, ex).total; }

void moe_window(const bf16* x, int64_t ldx, int64_t rows, const MoeExperts& ex, const int32_t* ids, const float* weights, void* scratch, float* y,
                int64_t ldy, bool accumulate, cudaStream_t stream) {
  if (ex.hidden % 8 != 0 || ex.inter % 8 != 0 || ldx % 8 != 0 || ldy % 4 != 0 || reinterpret_cast<uintptr_t>(x) % 16 != 0 ||
      reinterpret_cast<uintptr_t>(y) % 16 != 0)
    fail("moe_window: H, I and the row strides must be multiples of 8 (y: 4) with 16-byte aligned rows");
  if (ex.experts + (ex.shared ? 1 : 0) > kMoeMaxExperts + 1) fail("moe_window: ", ex.experts, " experts (at most ", kMoeMaxExperts, ")");
  if (rows <= 0) return;
  const Layout l = layout(rows, ex);
  if (l.places > (int64_t{1} << 31) - 1) fail("moe_window: ", rows, " rows is too many for one call");
  std::byte* s = static_cast<std::byte*>(scratch);
  auto* sorted = reinterpret_cast<int32_t*>(s + l.sorted);
  auto* place = reinterpret_cast<int32_t*>(s + l.place);
  auto* tile_expert = reinterpret_cast<int32_t*>(s + l.tile_expert);
  auto* act = reinterpret_cast<bf16*>(s + l.act);
  auto* out = reinterpret_cast<float*>(s + l.out);

  moe_group(ids, l.pairs, ex.slots, static_cast<int>(l.groups), l.tiles, l.BM, sorted, place, tile_expert, stream);
  // Prompt windows: 128 x 256 tiles of 64 x 64 warps (35B-A3B 8k prefill on an H100: 33.8k tok/s
  // with 64 x 128 tiles, 39.4k with 128 x 256 of 32 x 64 warps, 40.0k with 64 x 64 warps, 37.3k
  // with 128 x 128: bench/results/2026-12-06-0630-h100-moe-tiles.md).
  if (l.BM == 32) grouped_gemms<32, 128>(x, ldx, l.tiles, ex, sorted, tile_expert, act, out, stream);
  else if (l.BM == 64) grouped_gemms<64, 128>(x, ldx, l.tiles, ex, sorted, tile_expert, act, out, stream);
  else if (moe_wgmma_enabled()) moe_grouped_gemms_wgmma(x, ldx, l.tiles, ex, sorted, tile_expert, act, out, stream);
  else grouped_gemms<128, 256, 64>(x, ldx, l.tiles, ex, sorted, tile_expert, act, out, stream);
  moe_gather(out, place, weights, ex.slots, ex.hidden, rows, y, ldy, accumulate, stream);
}

}  // namespace qwenrt::cuda
