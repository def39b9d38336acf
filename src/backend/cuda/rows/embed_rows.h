#pragma once
// Embedding rows on the GPU: token ids to f32 rows of the bf16 table, one block per row.
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace qwenrt::cuda {

// out[r, :] = table[token_r, :] widened to f32. Row r's token is picks[from[r]] where from[r] >= 0
// (the pick of an earlier step, still on the device), else tokens[r].
void embed_rows(const int32_t* tokens, const int32_t* from, const int32_t* picks, int64_t rows, const __nv_bfloat16* table, int64_t width, float* out,
                cudaStream_t stream);

}  // namespace qwenrt::cuda
