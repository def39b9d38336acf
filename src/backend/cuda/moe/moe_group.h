#pragma once
// What the grouped expert paths share (moe_window.cu's GEMMs over bf16 experts, moe_decode_grouped.cu's
// products over packed ones): the (row, slot) pairs grouped by expert, and the weighted sum back.
//
//   moe_group   one block: the pairs counted per expert, each expert's run padded to `run` places
//               (a tile), every pair given a place in its expert's run (`sorted[place]`: the row
//               the place reads, -1 for padding; `place[pair]`: where pair (row, slot) went) and
//               every tile its expert (`tile_expert`, -1 past the last used tile). Places within a
//               run are handed out by shared-memory atomics, so their order varies from run to run;
//               nothing may depend on it (a place's result depends on its own row only).
//   moe_gather  y[row] (+)= Σ_slot w[row, slot] · out[place(row, slot)], slots in order, from 0:
//               the sum the decode kernels' down launch takes, bit for bit.
#include <cuda_runtime_api.h>

#include <cstdint>

namespace qwenrt::cuda {

// Tiles the grouping of `pairs` pairs over `groups` experts may use with runs of `run` places.
constexpr int64_t moe_group_max_tiles(int64_t pairs, int64_t groups, int run) { return (pairs + run - 1) / run + groups; }

// sorted: [tiles · run], place: [pairs], tile_expert: [tiles] (tiles >= moe_group_max_tiles).
// ids: [pairs] expert indices < groups <= kMoeMaxExperts + 1.
void moe_group(const int32_t* ids, int64_t pairs, int slots, int groups, int64_t tiles, int run, int32_t* sorted, int32_t* place,
               int32_t* tile_expert, cudaStream_t stream);

// out: f32 [places, H] (rows 16-byte aligned: H a multiple of 4); y: rows of stride ldy.
void moe_gather(const float* out, const int32_t* place, const float* weights, int slots, int64_t H, int64_t rows, float* y, int64_t ldy,
                bool accumulate, cudaStream_t stream);

}  // namespace qwenrt::cuda
