#pragma once
// Decode products for 1..8 activation rows that stream the weights through a ring of
// shared-memory stages filled by bulk copies (TMA, sm_90): the bytes in flight per multiprocessor
// are set by the ring, not by registers, and the copies run ahead across row tiles, so a block
// never stops streaming between tiles. The same products as skinny_gemm (several weights, SwiGLU
// pairs, normalised rows, accumulation), which hands them here when weight_stream_suits says so.
// Results are batch-invariant (each dot product's order depends on k alone). Hopper only; Error
// elsewhere.
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "backend/cuda/skinny_gemm.h"

namespace qwenrt::cuda {

// What one launch computes. Tile t of weight s covers its rows 16·(t − first_tile[s]) onwards; with
// `up` (count 1) a tile is 8 rows of seg[0].w (gate) and the same 8 of up, and the launch writes
// act[b · ld_act + r] = bf16(silu(gate_r · x_b) · (up_r · x_b)) instead of y. With norm.h the
// activations are RMSNorm(h)·w rounded to bf16 as skinny_gemm's normalised rows are, and x is unused.
struct WeightStreamJob {
  GemmSegment seg[kSkinnyGemmMaxSegments];
  int first_tile[kSkinnyGemmMaxSegments + 1] = {};
  int count = 0;
  int tiles = 0;
  bool split_tail = false;   // set by weight_stream_run
  float* partial = nullptr;  // split tails: kWeightStreamMaxBlocks · 2 · 128 floats
  uint32_t* counters = nullptr;  // split tails: kWeightStreamMaxBlocks zeros (left zero)
  const __nv_bfloat16* up = nullptr;
  __nv_bfloat16* act = nullptr;
  int64_t ld_act = 0;
  SkinnyNormedRows norm;
};

// How the ring is built: stages per ring (3, 4 or 6) and blocks per multiprocessor (0: as many as
// fit, 2 for 3 stages, else 1; fewer leave room for the next chained launch to start streaming);
// blocks take every gridDim-th tile, with the last partial round's tiles either whole or split by
// stages evenly over all blocks (split_tail: needs the workspace). (Consecutive tiles per block
// measured no faster: bench/results/2026-12-03-0840-h200.md.)
struct WeightStreamConfig {
  int stages = 3;
  bool split_tail = true;
  int blocks_per_sm = 0;
};

// Blocks of one launch at most (the counters a split tail needs), and its workspace bytes.
constexpr int kWeightStreamMaxBlocks = kSkinnyGemmCounters;
constexpr std::size_t kWeightStreamWorkspaceBytes = std::size_t{kWeightStreamMaxBlocks} * 2 * 128 * sizeof(float);

// x: [n, k] bf16, row stride ldx; 1 <= n <= 8; k, ldx multiples of 8; x and weights 16-byte
// aligned. Split tails use job.partial and job.counters.
void weight_stream_run(const __nv_bfloat16* x, int64_t n, int64_t k, int64_t ldx, const WeightStreamJob& job, cudaStream_t stream,
                       const WeightStreamConfig& config = {});

// One weight: y[b * ldy + r] (+)= x_b · w_r for r < rows.
void weight_stream_gemm(const __nv_bfloat16* x, int64_t n, int64_t k, int64_t ldx, const __nv_bfloat16* w, int64_t rows, float* y,
                        int64_t ldy, bool accumulate, cudaStream_t stream, const SkinnyGemmWorkspace& workspace,
                        const WeightStreamConfig& config = {});

// Whether skinny_gemm hands a launch of `tiles` row tiles here (plain: no normalised rows, no
// SwiGLU pairs). Only on Hopper and when asked for (it measured slower inside decode steps):
// QWENRT_CUDA_RING=plain takes plain launches of 128 to two-per-multiprocessor tiles, =all every
// launch of 128+ tiles.
bool weight_stream_suits(int64_t tiles, bool plain);

}  // namespace qwenrt::cuda
