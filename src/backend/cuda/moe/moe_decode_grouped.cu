// moe_decode_grouped: packed experts for batches of more than kMoeDecodeRows rows. moe_decode gives
// every (row, slot) pair its own blocks, each streaming its expert's packed rows: at 64 rows of
// 35B-A3B that is 512 expert reads a layer for about 221 chosen experts, and the shared expert read
// 64 times. Here the pairs are grouped by expert first (moe_group, runs of kRun places), and one
// block reads an expert's pieces once for the kRun places of its run (quant/piece_dot.cuh's
// multi-row form: each piece dequantized once, then multiplied into every place's sums).
//
// Each place's sums are taken exactly as moe_decode_packed takes a pair's (the same pieces per
// lane in the same order, the same butterfly), the down products come back per place in f32, and
// moe_gather adds a row's slots in slot order from 0 as moe_decode's down launch does: every row is
// the same bits as in moe_decode, alone or in any batch.
//
//   1. moe_group: places by expert (order within a run free: no place reads another's values)
//   2. x rows gathered into the places' order (padding places: zeros)
//   3. gate/up: act[place] = bf16(silu(x·G) · (x·U)), grid (FFN columns / 8, tiles)
//   4. down: out[place] = act[place] · D, f32, grid (hidden columns / 8, tiles)
//   5. moe_gather into y
#include "backend/cuda/moe/moe.h"
#include "backend/cuda/moe/moe_decode_packed.h"
#include "backend/cuda/moe/moe_group.h"
#include "backend/cuda/ptx/gate_math.cuh"
#include "backend/cuda/ptx/mma.cuh"
#include "backend/cuda/quant/piece_dot.cuh"
#include "backend/cuda/runtime/chained_launch.h"
#include "backend/cuda/runtime/cuda_check.h"
#include "core/error.h"

namespace qwenrt::cuda {
namespace {

using bf16 = __nv_bfloat16;
constexpr int kWarps = 4;
constexpr int kColsPerWarp = 2;
// Places a block multiplies each piece into: an expert chosen by more pairs gets more runs (its
// rows read again, mostly from L2). 35B-A3B at 64 rows: ~2.3 pairs per chosen routed expert.
constexpr int kRun = 4;

struct Layout {
  int64_t pairs, groups, tiles, places;
  std::size_t sorted, place, tile_expert, xg, act, out, total;  // byte offsets in the scratch
};
std::size_t align16(std::size_t n) { return (n + 15) / 16 * 16; }
Layout layout(int64_t rows, const MoeExperts& ex) {
  Layout l{};
  l.pairs = rows * ex.slots;
  l.groups = ex.experts + (ex.shared ? 1 : 0);
  l.tiles = moe_group_max_tiles(l.pairs, l.groups, kRun);
  l.places = l.tiles * kRun;
  std::size_t at = 0;
  auto take = [&](std::size_t bytes) {
    const std::size_t o = at;
    at += align16(bytes);
    return o;
  };
  l.sorted = take(static_cast<std::size_t>(l.places) * 4);
  l.place = take(static_cast<std::size_t>(l.pairs) * 4);
  l.tile_expert = take(static_cast<std::size_t>(l.tiles) * 4);
  l.xg = take(static_cast<std::size_t>(l.places * ex.hidden) * sizeof(bf16));
  l.act = take(static_cast<std::size_t>(l.places * ex.inter) * sizeof(bf16));
  l.out = take(static_cast<std::size_t>(l.places * ex.hidden) * sizeof(float));
  l.total = at;
  return l;
}

__device__ __forceinline__ const uint8_t* row_at(const QuantMatrix& m, int64_t r) { return static_cast<const uint8_t*>(m.data) + r * m.row_bytes(); }

// grid (places): xg[place] = x[sorted[place]], zeros for padding.
__global__ void gather_rows_kernel(const bf16* x, int64_t ldx, const int32_t* sorted, int64_t H, bf16* xg) {
  chained_kernel_start();
  const int64_t p = blockIdx.x;
  const int32_t row = sorted[p];
  for (int64_t c = threadIdx.x * 8; c < H; c += blockDim.x * 8) {
    const uint4 v = row >= 0 ? *reinterpret_cast<const uint4*>(x + row * ldx + c) : make_uint4(0, 0, 0, 0);
    *reinterpret_cast<uint4*>(xg + p * H + c) = v;
  }
}

// grid (ceil(I / (kWarps·kColsPerWarp)), tiles).
template <QuantKind K>
__global__ void __launch_bounds__(kWarps * 32) gate_up_kernel(const bf16* xg, MoeExperts ex, const int32_t* tile_expert, bf16* act) {
  chained_kernel_start();
  const int64_t e = tile_expert[blockIdx.y];
  if (e < 0) return;
  constexpr int kPer = quant::kPieceElements<K>;
  const int lane = threadIdx.x % 32;
  const int64_t H = ex.hidden, I = ex.inter;
  const int64_t col0 = (static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32) * kColsPerWarp;
  if (col0 >= I) return;
  const QuantMatrix& m = ex.gate_up_packed;
  const bf16* xt = xg + static_cast<int64_t>(blockIdx.y) * kRun * H;
  float g[kColsPerWarp][kRun][4] = {}, u[kColsPerWarp][kRun][4] = {};
  const int64_t pieces = H / kPer;
  for (int64_t i = lane; i < pieces; i += 32) {
    uint4 qg[kColsPerWarp], qu[kColsPerWarp];
#pragma unroll
    for (int j = 0; j < kColsPerWarp; ++j) {
      const int64_t rg = e * 2 * I + col0 + j, ru = rg + I;
      const bool in = col0 + j < I;
      qg[j] = in ? load_stream16(row_at(m, rg) + i * 16) : make_uint4(0, 0, 0, 0);
      qu[j] = in ? load_stream16(row_at(m, ru) + i * 16) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int j = 0; j < kColsPerWarp; ++j) {
      const int64_t rg = e * 2 * I + col0 + j, ru = rg + I;
      if (col0 + j >= I) continue;
      piece<K, kRun>(m, rg, i * kPer, qg[j], xt, H, g[j]);
      piece<K, kRun>(m, ru, i * kPer, qu[j], xt, H, u[j]);
    }
  }
#pragma unroll
  for (int j = 0; j < kColsPerWarp; ++j)
#pragma unroll
    for (int p = 0; p < kRun; ++p) {
      const float gs = warp_sum(g[j][p]), us = warp_sum(u[j][p]);
      if (lane == 0 && col0 + j < I) act[(static_cast<int64_t>(blockIdx.y) * kRun + p) * I + col0 + j] = __float2bfloat16_rn(swiglu(gs, us));
    }
}

// grid (ceil(H / (kWarps·kColsPerWarp)), tiles): out[place, col] = act[place] · D_e[col].
template <QuantKind K>
__global__ void __launch_bounds__(kWarps * 32) down_kernel(const bf16* act, MoeExperts ex, const int32_t* tile_expert, float* out) {
  chained_kernel_start();
  const int64_t e = tile_expert[blockIdx.y];
  if (e < 0) return;
  constexpr int kPer = quant::kPieceElements<K>;
  const int lane = threadIdx.x % 32;
  const int64_t H = ex.hidden, I = ex.inter;
  const int64_t col0 = (static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32) * kColsPerWarp;
  if (col0 >= H) return;
  const QuantMatrix& m = ex.down_packed;
  const bf16* at = act + static_cast<int64_t>(blockIdx.y) * kRun * I;
  float part[kColsPerWarp][kRun][4] = {};
  const int64_t pieces = I / kPer;
  for (int64_t i = lane; i < pieces; i += 32) {
    uint4 q[kColsPerWarp];
#pragma unroll
    for (int j = 0; j < kColsPerWarp; ++j) q[j] = col0 + j < H ? load_stream16(row_at(m, e * H + col0 + j) + i * 16) : make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int j = 0; j < kColsPerWarp; ++j)
      if (col0 + j < H) piece<K, kRun>(m, e * H + col0 + j, i * kPer, q[j], at, I, part[j]);
  }
#pragma unroll
  for (int j = 0; j < kColsPerWarp; ++j)
#pragma unroll
    for (int p = 0; p < kRun; ++p) {
      const float s = warp_sum(part[j][p]);
      if (lane == 0 && col0 + j < H) out[(static_cast<int64_t>(blockIdx.y) * kRun + p) * H + col0 + j] = s;
    }
}

template <QuantKind K>
void products(const bf16* xg, const MoeExperts& ex, int64_t tiles, const int32_t* tile_expert, bf16* act, float* out, cudaStream_t stream) {
  constexpr int per_block = kWarps * kColsPerWarp;
  const dim3 gu_grid(static_cast<unsigned>((ex.inter + per_block - 1) / per_block), static_cast<unsigned>(tiles));
  launch_chained(gate_up_kernel<K>, gu_grid, dim3(kWarps * 32), 0, stream, xg, ex, tile_expert, act);
  QWENRT_CUDA_CHECK_LAUNCH();
  const dim3 down_grid(static_cast<unsigned>((ex.hidden + per_block - 1) / per_block), static_cast<unsigned>(tiles));
  launch_chained(down_kernel<K>, down_grid, dim3(kWarps * 32), 0, stream, static_cast<const bf16*>(act), ex, tile_expert, out);
  QWENRT_CUDA_CHECK_LAUNCH();
}

}  // namespace

std::size_t moe_decode_grouped_scratch_bytes(int64_t rows, const MoeExperts& ex) { return layout(rows, ex).total; }

void moe_decode_grouped(const bf16* x, int64_t ldx, int64_t rows, const MoeExperts& ex, const int32_t* ids, const float* weights, void* scratch,
                        float* y, int64_t ldy, bool accumulate, cudaStream_t stream) {
  if (!ex.packed) fail("internal: moe_decode_grouped of bf16 experts");
  if (ex.hidden % 8 != 0 || ex.inter % 8 != 0 || ldx % 8 != 0 || ldy % 4 != 0 || reinterpret_cast<uintptr_t>(x) % 16 != 0 ||
      reinterpret_cast<uintptr_t>(y) % 16 != 0)
    fail("moe_decode_grouped: H, I and the row strides must be multiples of 8 (y: 4) with 16-byte aligned rows");
  if (ex.experts + (ex.shared ? 1 : 0) > kMoeMaxExperts + 1) fail("moe_decode_grouped: ", ex.experts, " experts (at most ", kMoeMaxExperts, ")");
  if (rows <= 0) return;
  check_packed_experts(ex, "moe_decode_grouped");
  const Layout l = layout(rows, ex);
  if (l.places > (int64_t{1} << 31) - 1) fail("moe_decode_grouped: ", rows, " rows is too many for one call");
  std::byte* s = static_cast<std::byte*>(scratch);
  auto* sorted = reinterpret_cast<int32_t*>(s + l.sorted);
  auto* place = reinterpret_cast<int32_t*>(s + l.place);
  auto* tile_expert = reinterpret_cast<int32_t*>(s + l.tile_expert);
  auto* xg = reinterpret_cast<bf16*>(s + l.xg);
  auto* act = reinterpret_cast<bf16*>(s + l.act);
  auto* out = reinterpret_cast<float*>(s + l.out);
  moe_group(ids, l.pairs, ex.slots, static_cast<int>(l.groups), l.tiles, kRun, sorted, place, tile_expert, stream);
  const dim3 gather_grid(static_cast<unsigned>(l.places));
  launch_chained(gather_rows_kernel, gather_grid, dim3(128), 0, stream, x, ldx, static_cast<const int32_t*>(sorted), ex.hidden, xg);
  QWENRT_CUDA_CHECK_LAUNCH();
  switch (ex.gate_up_packed.kind) {
    case QuantKind::Affine4: products<QuantKind::Affine4>(xg, ex, l.tiles, tile_expert, act, out, stream); break;
    case QuantKind::Affine8: products<QuantKind::Affine8>(xg, ex, l.tiles, tile_expert, act, out, stream); break;
    case QuantKind::Fp8: products<QuantKind::Fp8>(xg, ex, l.tiles, tile_expert, act, out, stream); break;
  }
  moe_gather(out, place, weights, ex.slots, ex.hidden, rows, y, ldy, accumulate, stream);
}

}  // namespace qwenrt::cuda
