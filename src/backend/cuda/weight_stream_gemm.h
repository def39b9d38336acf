#pragma once
// Decode product y (+)= x · Wᵀ for 1..8 activation rows that streams the weight
// through a ring of shared-memory stages filled by bulk copies (TMA, sm_90): the bytes in flight
// per multiprocessor are set by the ring, not by registers, and the copies run ahead across row
// tiles, so a block never stops streaming between tiles. Results are batch-invariant (the order of
// each dot product depends on k alone). Hopper only; Error elsewhere.
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace qwenrt::cuda {

// x: [n, k] bf16, row stride ldx; w: [rows, k] bf16 row-major; y[b * ldy + r] for activation row b
// and weight row r, added to when `accumulate`. 1 <= n <= 8; k, ldx multiples of 8; x, w 16-byte
// aligned. `blocks_per_sm`: 1 leaves room for the next launch's ring (chained launches), 2 fills
// the multiprocessor.
void weight_stream_gemm(const __nv_bfloat16* x, int64_t n, int64_t k, int64_t ldx, const __nv_bfloat16* w, int64_t rows, float* y,
                        int64_t ldy, bool accumulate, cudaStream_t stream, int blocks_per_sm = 2);

// Whether the current GPU runs a weight of `rows` rows here with the blocks evenly loaded (Hopper;
// the row tiles fill two blocks per multiprocessor to within 10%): skinny_gemm then hands plain
// single-weight products to it. For now only with QWENRT_CUDA_RING=1 (not yet measured inside
// decode steps).
bool weight_stream_suits(int64_t rows);

}  // namespace qwenrt::cuda
