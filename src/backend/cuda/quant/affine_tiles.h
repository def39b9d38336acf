#pragma once
// MLX affine weights in 4-bit and 8-bit containers laid out in tensor-core tiles: the layout the
// uploader makes at load (model/cuda/quant_upload, through affine_tiling.h's kernels) and the decode
// kernel reads (skinny_quant_affine_tiles.cu). A lane's one 16-byte load of a plane holds exactly
// its m16n8k16 A fragments for four steps, and a pair of fields becomes an exact bf16 pair with a
// shift, one LOP3 and one subtract: the row-major warp-per-row kernel spent ~5 instructions per
// field and stayed at 37% (4-bit) and 49% (8-bit) of the bandwidth floor. Host and device code
// alike (quant_decode.cuh reads elements through it).
//
//   Tile T = rows [16T, 16T + 16) (rows padded to a multiple of 16 with zero fields, scales and
//   biases); unit U = columns [64U, 64U + 64) (cols a multiple of 64). A unit holds one plane of
//   512 bytes per 4 bits of the container: 4-bit fields are plane 0; 8-bit fields q = lo + 16·hi
//   keep their low nibbles in plane 0 and their high nibbles in plane 1. Unit (T, U) is at
//   (T · cols/64 + U) · unit_bytes, plane p at + 512p. In a plane, lane l = 4g + t (g = 0..7,
//   t = 0..3) owns the 16 bytes at +16l: word s (s = 0..3: the mma step over the 16 columns
//   64U + 16s ..) holds rows r_g = 16T + g and r_h = r_g + 8 at columns 64U + 16s + 4t + j
//   (j = 0..3), at nibble 4(j & 1) + 2(j >> 1) (+1 for r_h). So nibbles p and p + 4 of a word are
//   fragment register a_p: p = 0 (r_g, j = 0, 1), 1 (r_h, j = 0, 1), 2 (r_g, j = 2, 3), 3 (r_h,
//   j = 2, 3), the lower column in the low half (low_pair(), high_pair()). The mma's k = 2t, 2t + 1,
//   2t + 8, 2t + 9 of lane t stand for columns 16s + 4t + 0..3; the activations are taken in the
//   same map (b0 = columns 4t, 4t + 1, b1 = 4t + 2, 4t + 3: one 8-byte load), so the dot product is
//   unchanged. A step never straddles a group (32, 64 or 128 columns).
//
//   Scales and biases: one table in the checkpoint's scale type (bf16, f16, f32), [T][group][g][4]
//   holding scale and bias of r_g, then scale and bias of r_h: lane (g, t) reads a group's four
//   values with one load. As many bytes as the row-major scales and biases (of the padded rows).
#include <cuda_runtime.h>

#include <cstdint>

namespace qwenrt::cuda::affine_tiles {

constexpr int kTileRows = 16;
constexpr int kUnitCols = 64;
constexpr int kPlaneBytes = kTileRows * kUnitCols / 2;

// Containers that tile: 4-bit (one plane) and 8-bit (two).
__host__ __device__ constexpr bool tileable_bits(int bits) { return bits == 4 || bits == 8; }
__host__ __device__ constexpr int planes(int bits) { return bits / 4; }
__host__ __device__ constexpr int unit_bytes(int bits) { return planes(bits) * kPlaneBytes; }

// Whether a weight of `cols` columns can be laid out in tiles.
__host__ __device__ constexpr bool tileable(int64_t cols) { return cols % kUnitCols == 0; }

__host__ __device__ constexpr int64_t tiles(int64_t rows) { return (rows + kTileRows - 1) / kTileRows; }

// Bytes of the fields, and values (scales and biases together) of the table, rows padded to tiles.
__host__ __device__ constexpr int64_t field_bytes(int64_t rows, int64_t cols, int bits) { return tiles(rows) * kTileRows * cols * bits / 8; }
__host__ __device__ constexpr int64_t table_values(int64_t rows, int64_t groups) { return tiles(rows) * kTileRows * groups * 2; }

// Where a nibble of element (r, c)'s field is (plane 1: the high nibble of an 8-bit field): byte
// offset and bit shift (0 or 4).
struct NibbleAt {
  int64_t byte;
  int shift;
};
// The nibble of a lane's word that holds column j (0..3) of its four, of row r_g (h = 0) or r_h (1).
__host__ __device__ constexpr int nibble_in_word(int j, int h) { return 4 * (j & 1) + 2 * (j >> 1) + h; }

__host__ __device__ inline NibbleAt nibble_at(int64_t cols, int bits, int64_t r, int64_t c, int plane) {
  const int64_t unit = r / kTileRows * (cols / kUnitCols) + c / kUnitCols;
  const int g = static_cast<int>(r % 8), h = static_cast<int>(r % kTileRows / 8);
  const int s = static_cast<int>(c % kUnitCols / 16), t = static_cast<int>(c % 16 / 4);
  const int nibble = nibble_in_word(static_cast<int>(c % 4), h);
  return {unit * unit_bytes(bits) + plane * kPlaneBytes + 16 * (4 * g + t) + 4 * s + nibble / 2, 4 * (nibble % 2)};
}

// Index in the table of row r's scale for `group` (of `groups` per row); its bias is the next value.
__host__ __device__ inline int64_t scale_index(int64_t groups, int64_t r, int64_t group) {
  return ((r / kTileRows * groups + group) * 8 + r % 8) * 4 + r % kTileRows / 8 * 2;
}

// Fragment register a_p (p = 0..3) of a lane's word: nibbles p and p + 4 put under a bf16 pair's
// exponent (one shift and one LOP3 on the GPU; written out: ptxas leaves (a & m) | c as two).
template <uint32_t kExponentPair>
__host__ __device__ inline uint32_t nibble_pair_under(uint32_t word, int p) {
#ifdef __CUDA_ARCH__
  uint32_t r;
  asm("lop3.b32 %0, %1, %2, %3, 0xEA;" : "=r"(r) : "r"(word >> (4 * p)), "n"(0x000F000Fu), "n"(kExponentPair));
  return r;
#else
  return ((word >> (4 * p)) & 0x000F000Fu) | kExponentPair;
#endif
}

// The bf16 pair (128 + n_lo, 128 + n_hi) of a low-plane word (128's ulp is 1): minus kBf16Pair128,
// exactly, it is the fields (4-bit) or low nibbles (8-bit) themselves.
constexpr uint32_t kBf16Pair128 = 0x43004300u;
__host__ __device__ inline uint32_t low_pair(uint32_t word, int p) { return nibble_pair_under<kBf16Pair128>(word, p); }

// The bf16 pair (2048 + 16 n_lo, 2048 + 16 n_hi) of a high-plane word (2048's ulp is 16): minus
// kBf16Pair2176, exactly, it is 16·n - 128 per element. With the low plane's n that makes q - 128
// for an 8-bit field q: the 8-bit kernel sums (q - 128)·x and folds the bias as b + 128·s, so its
// two terms do not cancel (s·Σq·x and b·Σx are each ~128 times the result for a centred weight).
constexpr uint32_t kBf16Pair2048 = 0x45004500u;
constexpr uint32_t kBf16Pair2176 = 0x45084508u;
__host__ __device__ inline uint32_t high_pair(uint32_t word, int p) { return nibble_pair_under<kBf16Pair2048>(word, p); }

// A pair of bf16 ones: the A operand whose product with the activations is their sum per group.
constexpr uint32_t kBf16PairOnes = 0x3F803F80u;

}  // namespace qwenrt::cuda::affine_tiles
