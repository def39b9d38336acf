// Quantized rows widened on the GPU: to a bf16 scratch matrix (prompt products) and to f32
// embedding rows (dequantize_rows.h).
#include <algorithm>
#include <cstdint>

#include "backend/cuda/ptx/mma.cuh"
#include "backend/cuda/quant/affine_tiles.h"
#include "backend/cuda/quant/dequantize_rows.h"
#include "backend/cuda/quant/quant_decode.cuh"
#include "backend/cuda/runtime/chained_launch.h"
#include "backend/cuda/runtime/cuda_check.h"
#include "core/error.h"

namespace qwenrt::cuda {
namespace {

constexpr int kThreads = 256;

// Thread i of the grid-stride loop widens one 16-byte piece of a row (32 fields of 4 bits, 16 of 8:
// all inside one affine group or FP8 tile, check_quant_matrix) with its one scale and bias, and
// writes its 16 or 32 bf16 values (each value as quant::piece_value computes it, rounded once).
template <QuantKind K>
__global__ void dequantize_kernel(QuantMatrix m, int64_t r0, int64_t count, __nv_bfloat16* out) {
  constexpr int kPer = quant::kPieceElements<K>;
  chained_kernel_start();
  const int64_t per_row = m.cols / kPer, total = count * per_row;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; i < total; i += static_cast<int64_t>(gridDim.x) * kThreads) {
    const int64_t r = i / per_row, e0 = (i % per_row) * kPer;
    const auto* row = static_cast<const uint8_t*>(m.data) + (r0 + r) * m.row_bytes();
    const uint4 q = load_stream16(row + e0 * m.row_bytes() / m.cols);
    const uint32_t w[4] = {q.x, q.y, q.z, q.w};
    float scale, bias;
    quant::piece_scale_bias<K>(m, r0 + r, e0, scale, bias);
    uint4* dst = reinterpret_cast<uint4*>(out + r * m.cols + e0);
#pragma unroll
    for (int o = 0; o < kPer / 8; ++o) {
      uint32_t packed[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const uint32_t lo = __bfloat16_as_ushort(__float2bfloat16_rn(quant::piece_value<K>(w, 8 * o + 2 * j, scale, bias)));
        const uint32_t hi = __bfloat16_as_ushort(__float2bfloat16_rn(quant::piece_value<K>(w, 8 * o + 2 * j + 1, scale, bias)));
        packed[j] = lo | (hi << 16);
      }
      dst[o] = make_uint4(packed[0], packed[1], packed[2], packed[3]);
    }
  }
}

// Tiles (affine_tiles.h): thread i widens one lane's 16 bytes of each plane of a unit, rows g and
// g + 8 of its tile at 16 columns (four steps of four), each value fma(s, q, b) rounded once to bf16
// as above, and writes each row's four columns of a step with one 8-byte store. Rows outside
// [r0, r0 + count) are skipped (r0 need not start a tile).
template <int Bits>
__global__ void dequantize_tiles_kernel(QuantMatrix m, int64_t r0, int64_t count, __nv_bfloat16* out) {
  namespace at = affine_tiles;
  chained_kernel_start();
  const int64_t units = m.cols / at::kUnitCols, groups = m.cols / m.group_size, first_tile = r0 / at::kTileRows;
  const int64_t total = (at::tiles(r0 + count) - first_tile) * units * 32;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; i < total; i += static_cast<int64_t>(gridDim.x) * kThreads) {
    const int lane = static_cast<int>(i % 32), g = lane / 4, t = lane % 4;
    const int64_t unit = i / 32 % units, tile = first_tile + i / 32 / units;
    const uint8_t* piece = static_cast<const uint8_t*>(m.data) + (tile * units + unit) * at::unit_bytes(Bits) + 16 * lane;
    const uint4 q = load_stream16(piece);
    const uint4 q_hi = Bits == 8 ? load_stream16(piece + at::kPlaneBytes) : make_uint4(0, 0, 0, 0);
    const uint32_t w[4] = {q.x, q.y, q.z, q.w}, w_hi[4] = {q_hi.x, q_hi.y, q_hi.z, q_hi.w};
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int64_t r = tile * at::kTileRows + g + 8 * h;
      if (r < r0 || r >= r0 + count) continue;
        // Steps 0-1 and 2-3 each lie inside one group (of 32 columns at least).
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int64_t e = at::scale_index(groups, r, (unit * at::kUnitCols + 32 * half) / m.group_size);
        const float scale = quant::load_scale(m.scales, m.scale_type, e), bias = quant::load_scale(m.scales, m.scale_type, e + 1);
#pragma unroll
        for (int s = 2 * half; s < 2 * half + 2; ++s) {
          uint32_t v[4];
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            const int shift = 4 * at::nibble_in_word(j, h);
            const uint32_t q = ((w[s] >> shift) & 0xfu) | ((w_hi[s] >> shift) & 0xfu) << 4;
            v[j] = __bfloat16_as_ushort(__float2bfloat16_rn(quant::fma_rn(scale, quant::field_to_f32(q), bias)));
          }
          const int64_t c0 = unit * at::kUnitCols + 16 * s + 4 * t;
          *reinterpret_cast<uint2*>(out + (r - r0) * m.cols + c0) = make_uint2(v[0] | (v[1] << 16), v[2] | (v[3] << 16));
        }
      }
    }
  }
}

template <QuantKind K>
void launch_dequantize(const QuantMatrix& m, int64_t r0, int64_t count, __nv_bfloat16* out, dim3 blocks, cudaStream_t stream) {
  const auto kernel = dequantize_kernel<K>;
  launch_chained(kernel, blocks, dim3(kThreads), 0, stream, m, r0, count, out);
}

__global__ void embed_quant_kernel(const int32_t* tokens, const int32_t* from, const int32_t* picks, QuantMatrix m, float* out) {
  chained_kernel_start();
  const int32_t f = from[blockIdx.x];
  const int32_t token = f >= 0 ? picks[f] : tokens[blockIdx.x];
  float* dst = out + static_cast<int64_t>(blockIdx.x) * m.cols;
  for (int64_t c = threadIdx.x; c < m.cols; c += kThreads) dst[c] = quant::element(m, token, c);
}

}  // namespace

void dequantize_rows(const QuantMatrix& m, int64_t r0, int64_t count, __nv_bfloat16* out, cudaStream_t stream) {
  check_quant_matrix(m, "dequantize_rows");
  if (r0 < 0 || count < 0 || r0 + count > m.rows) fail("dequantize_rows: rows [", r0, ", ", r0 + count, ") of a ", m.rows, "-row matrix");
  if (reinterpret_cast<uintptr_t>(out) % 16 != 0) fail("dequantize_rows: the output is not 16-byte aligned");
  if (count == 0) return;
  const int64_t work = count * (m.cols / m.elements_per_load());  // 16-byte loads, in rows or tiles alike (about)
  const dim3 blocks(static_cast<unsigned>(std::min<int64_t>((work + kThreads - 1) / kThreads, int64_t{1} << 16)));
  if (m.tiled) {
    const auto kernel = m.container_bits() == 8 ? dequantize_tiles_kernel<8> : dequantize_tiles_kernel<4>;
    launch_chained(kernel, blocks, dim3(kThreads), 0, stream, m, r0, count, out);
    QWENRT_CUDA_CHECK_LAUNCH();
    return;
  }
  switch (m.kind) {
    case QuantKind::Affine4: launch_dequantize<QuantKind::Affine4>(m, r0, count, out, blocks, stream); break;
    case QuantKind::Affine8: launch_dequantize<QuantKind::Affine8>(m, r0, count, out, blocks, stream); break;
    case QuantKind::Fp8: launch_dequantize<QuantKind::Fp8>(m, r0, count, out, blocks, stream); break;
  }
  QWENRT_CUDA_CHECK_LAUNCH();
}

void embed_quant_rows(const int32_t* tokens, const int32_t* from, const int32_t* picks, int64_t rows, const QuantMatrix& table, float* out,
                      cudaStream_t stream) {
  check_quant_matrix(table, "embed_quant_rows");
  if (rows < 0 || rows > (1ll << 31) - 1) fail("embed_quant_rows: ", rows, " rows is out of range");
  if (rows == 0) return;
  launch_chained(embed_quant_kernel, dim3(static_cast<unsigned>(rows)), dim3(kThreads), 0, stream, tokens, from, picks, table, out);
  QWENRT_CUDA_CHECK_LAUNCH();
}

}  // namespace qwenrt::cuda
