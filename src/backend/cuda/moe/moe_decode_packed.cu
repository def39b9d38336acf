// moe_decode over packed quantized experts (MoeExperts::packed): the structure of the bf16 decode
// kernels (moe_decode.cu), each 16-byte piece of a selected expert's row dequantized in registers
// and multiplied as the warp-per-row quantized products do (quant/piece_dot.cuh): a row's result
// does not depend on the other rows. Only the selected experts' packed bytes are read.
#include <string>

#include "backend/cuda/moe/moe.h"
#include "backend/cuda/moe/moe_decode_packed.h"
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

__device__ __forceinline__ const uint8_t* row_at(const QuantMatrix& m, int64_t r) { return static_cast<const uint8_t*>(m.data) + r * m.row_bytes(); }

// grid (ceil(I / (kWarps·kColsPerWarp)), rows·slots): act[pair, col] = bf16(silu(x·G[col]) · (x·U[col])).
template <QuantKind K>
__global__ void __launch_bounds__(kWarps * 32) gate_up_kernel(const bf16* x, int64_t ldx, MoeExperts ex, const int32_t* ids, bf16* act) {
  chained_kernel_start();
  constexpr int kPer = quant::kPieceElements<K>;
  const int lane = threadIdx.x % 32;
  const int pair = blockIdx.y;
  const int64_t row = pair / ex.slots, H = ex.hidden, I = ex.inter;
  const int64_t e = ids[pair];
  const int64_t col0 = (static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32) * kColsPerWarp;
  if (col0 >= I) return;
  const QuantMatrix& m = ex.gate_up_packed;
  const bf16* xr = x + row * ldx;
  float g[kColsPerWarp][1][4] = {}, u[kColsPerWarp][1][4] = {};
  const int64_t pieces = H / kPer;
  // Two of the lane's pieces per column in flight before they are multiplied (in order).
  for (int64_t i0 = lane; i0 < pieces; i0 += 2 * 32) {
    uint4 qg[2][kColsPerWarp], qu[2][kColsPerWarp];
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int j = 0; j < kColsPerWarp; ++j) {
        const int64_t i = i0 + h * 32, rg = e * 2 * I + col0 + j, ru = rg + I;
        const bool in = i < pieces && col0 + j < I;
        qg[h][j] = in ? load_stream16(row_at(m, rg) + i * 16) : make_uint4(0, 0, 0, 0);
        qu[h][j] = in ? load_stream16(row_at(m, ru) + i * 16) : make_uint4(0, 0, 0, 0);
      }
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int j = 0; j < kColsPerWarp; ++j) {
        const int64_t i = i0 + h * 32, rg = e * 2 * I + col0 + j, ru = rg + I;
        if (i >= pieces || col0 + j >= I) continue;
        piece<K, 1>(m, rg, i * kPer, qg[h][j], xr, 0, g[j]);
        piece<K, 1>(m, ru, i * kPer, qu[h][j], xr, 0, u[j]);
      }
  }
#pragma unroll
  for (int j = 0; j < kColsPerWarp; ++j) {
    const float gs = warp_sum(g[j][0]), us = warp_sum(u[j][0]);
    if (lane == 0 && col0 + j < I) act[static_cast<int64_t>(pair) * I + col0 + j] = __float2bfloat16_rn(swiglu(gs, us));
  }
}

// grid (ceil(H / (kWarps·kColsPerWarp)), rows): y[row, col] (+)= Σ_slot w_slot · act[pair]·D_e[col],
// slots in order.
template <QuantKind K>
__global__ void __launch_bounds__(kWarps * 32)
    down_kernel(const bf16* act, MoeExperts ex, const int32_t* ids, const float* weights, float* y, int64_t ldy, bool accumulate) {
  chained_kernel_start();
  constexpr int kPer = quant::kPieceElements<K>;
  const int lane = threadIdx.x % 32;
  const int64_t row = blockIdx.y, H = ex.hidden, I = ex.inter;
  const int slots = ex.slots;
  const int64_t col0 = (static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32) * kColsPerWarp;
  if (col0 >= H) return;
  const QuantMatrix& m = ex.down_packed;
  float sum[kColsPerWarp] = {};
  const int64_t pieces = I / kPer;
  // kSlotsInFlight slots at a time: their pieces loaded before any is multiplied (an expert's rows
  // are short: 35B-A3B's I = 512 is 16 four-bit pieces, one load per lane); each slot's sums then
  // taken and added in slot order, as one slot at a time would.
  constexpr int kSlotsInFlight = 4;
  for (int s0 = 0; s0 < slots; s0 += kSlotsInFlight) {
    float part[kSlotsInFlight][kColsPerWarp][1][4] = {};
    int64_t e[kSlotsInFlight];  // the slots' experts (0 past the last slot: never read)
#pragma unroll
    for (int d = 0; d < kSlotsInFlight; ++d) e[d] = s0 + d < slots ? ids[row * slots + s0 + d] : 0;
    for (int64_t i = lane; i < pieces; i += 32) {
      uint4 q[kSlotsInFlight][kColsPerWarp];
#pragma unroll
      for (int d = 0; d < kSlotsInFlight; ++d)
#pragma unroll
        for (int j = 0; j < kColsPerWarp; ++j)
          q[d][j] = s0 + d < slots && col0 + j < H ? load_stream16(row_at(m, e[d] * H + col0 + j) + i * 16) : make_uint4(0, 0, 0, 0);
#pragma unroll
      for (int d = 0; d < kSlotsInFlight; ++d) {
        if (s0 + d >= slots) break;
        const bf16* a = act + (row * slots + s0 + d) * I;
#pragma unroll
        for (int j = 0; j < kColsPerWarp; ++j)
          if (col0 + j < H) piece<K, 1>(m, e[d] * H + col0 + j, i * kPer, q[d][j], a, 0, part[d][j]);
      }
    }
#pragma unroll
    for (int d = 0; d < kSlotsInFlight; ++d) {
      if (s0 + d >= slots) break;
      const float w = weights[row * slots + s0 + d];
#pragma unroll
      for (int j = 0; j < kColsPerWarp; ++j) sum[j] = fmaf(w, warp_sum(part[d][j][0]), sum[j]);
    }
  }
#pragma unroll
  for (int j = 0; j < kColsPerWarp; ++j)
    if (lane == 0 && col0 + j < H) {
      float* out = y + row * ldy + col0 + j;
      *out = accumulate ? *out + sum[j] : sum[j];
    }
}

template <QuantKind K>
void launch(const bf16* x, int64_t ldx, int64_t rows, const MoeExperts& ex, const int32_t* ids, const float* weights, bf16* act, float* y,
            int64_t ldy, bool accumulate, cudaStream_t stream) {
  constexpr int per_block = kWarps * kColsPerWarp;
  const dim3 gu_grid(static_cast<unsigned>((ex.inter + per_block - 1) / per_block), static_cast<unsigned>(rows * ex.slots));
  launch_chained(gate_up_kernel<K>, gu_grid, dim3(kWarps * 32), 0, stream, x, ldx, ex, ids, act);
  QWENRT_CUDA_CHECK_LAUNCH();
  const dim3 down_grid(static_cast<unsigned>((ex.hidden + per_block - 1) / per_block), static_cast<unsigned>(rows));
  launch_chained(down_kernel<K>, down_grid, dim3(kWarps * 32), 0, stream, static_cast<const bf16*>(act), ex, ids, weights, y, ldy, accumulate);
  QWENRT_CUDA_CHECK_LAUNCH();
}

}  // namespace

void check_packed_experts(const MoeExperts& ex, const char* what) {
  const QuantMatrix& gu = ex.gate_up_packed;
  const QuantMatrix& d = ex.down_packed;
  check_quant_matrix(gu, (std::string(what) + " (gate/up)").c_str());
  check_quant_matrix(d, (std::string(what) + " (down)").c_str());
  const int64_t stacked = ex.experts + (ex.shared ? 1 : 0);
  if (gu.kind != d.kind || gu.cols != ex.hidden || d.cols != ex.inter || gu.rows != stacked * 2 * ex.inter || d.rows != stacked * ex.hidden)
    fail(what, ": packed experts of ", gu.rows, "x", gu.cols, " and ", d.rows, "x", d.cols, " for ", stacked, " experts of H ", ex.hidden, ", I ",
         ex.inter);
}

void moe_decode_packed(const bf16* x, int64_t ldx, int64_t rows, const MoeExperts& ex, const int32_t* ids, const float* weights, bf16* act, float* y,
                       int64_t ldy, bool accumulate, cudaStream_t stream) {
  check_packed_experts(ex, "moe_decode");
  switch (ex.gate_up_packed.kind) {
    case QuantKind::Affine4: return launch<QuantKind::Affine4>(x, ldx, rows, ex, ids, weights, act, y, ldy, accumulate, stream);
    case QuantKind::Affine8: return launch<QuantKind::Affine8>(x, ldx, rows, ex, ids, weights, act, y, ldy, accumulate, stream);
    case QuantKind::Fp8: return launch<QuantKind::Fp8>(x, ldx, rows, ex, ids, weights, act, y, ldy, accumulate, stream);
  }
}

}  // namespace qwenrt::cuda
