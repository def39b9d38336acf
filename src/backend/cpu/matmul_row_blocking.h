#pragma once
// The blocking every CPU row kernel (dense, MLX affine, FP8 block) walks: rows [r0, r1) of a weight
// matrix against all n rows of x. Weight rows are taken in blocks of 16 that stay in L1 while x
// streams past in blocks that stay in L2; within a block, register tiles of NX x rows by NW weight
// rows: 1 x 4 for a lone x row (decode: four weight rows in flight), else 4 x 2, 1 x 2, 4 x 1 and
// 1 x 1. Each (x row, weight row) sum is one tile's, computed over the full depth, so it does not
// depend on n or on the row range a thread takes.
#include <algorithm>
#include <cstdint>

namespace qwenrt::cpu {

// tile.template operator()<NX, NW>(i, r): the tile of x rows i .. i + NX - 1 and weight rows
// r .. r + NW - 1 (a generic lambda with template parameters).
template <class Tile>
inline void for_each_row_tile(int64_t n, int64_t k, int64_t r0, int64_t r1, Tile&& tile) {
  const int64_t x_block = std::max<int64_t>(4, (256 * 1024) / std::max<int64_t>(1, k * 4) / 4 * 4);
  const int64_t w_block = 16;
  for (int64_t wb = r0; wb < r1; wb += w_block) {
    const int64_t we = std::min(r1, wb + w_block);
    for (int64_t xb = 0; xb < n; xb += x_block) {
      const int64_t xe = std::min(n, xb + x_block);
      int64_t r = wb;
      if (xe - xb == 1)
        for (; r + 4 <= we; r += 4) tile.template operator()<1, 4>(xb, r);
      for (; r + 2 <= we; r += 2) {
        int64_t i = xb;
        for (; i + 4 <= xe; i += 4) tile.template operator()<4, 2>(i, r);
        for (; i < xe; ++i) tile.template operator()<1, 2>(i, r);
      }
      for (; r < we; ++r) {
        int64_t i = xb;
        for (; i + 4 <= xe; i += 4) tile.template operator()<4, 1>(i, r);
        for (; i < xe; ++i) tile.template operator()<1, 1>(i, r);
      }
    }
  }
}

// The same blocking for tiles whose weight rows come in pairs (two rows' 8 lanes in one 16-lane
// register): paired.template operator()<NX, NP>(i, r) takes x rows i .. i + NX − 1 against weight
// rows r .. r + 2·NP − 1: a lone x row 8 weight rows at a time (four sums in flight), else 4 x rows
// (then 1) against kWindowPairs pairs; a row left over in a block goes to single(i, r), one x row
// against one weight row (a kernel of the same bits).
template <int kWindowPairs, class Paired, class Single>
inline void for_each_paired_tile(int64_t n, int64_t k, int64_t r0, int64_t r1, Paired&& paired, Single&& single) {
  const int64_t x_block = std::max<int64_t>(4, (256 * 1024) / std::max<int64_t>(1, k * 4) / 4 * 4);
  for (int64_t wb = r0; wb < r1; wb += 16) {
    const int64_t we = std::min(r1, wb + 16);
    for (int64_t xb = 0; xb < n; xb += x_block) {
      const int64_t xe = std::min(n, xb + x_block);
      int64_t r = wb;
      if (xe - xb == 1)
        for (; r + 8 <= we; r += 8) paired.template operator()<1, 4>(xb, r);
      for (; r + 2 * kWindowPairs <= we; r += 2 * kWindowPairs) {
        int64_t i = xb;
        for (; i + 4 <= xe; i += 4) paired.template operator()<4, kWindowPairs>(i, r);
        for (; i < xe; ++i) paired.template operator()<1, kWindowPairs>(i, r);
      }
      for (; r < we; ++r)
        for (int64_t i = xb; i < xe; ++i) single(i, r);
    }
  }
}

}  // namespace qwenrt::cpu
