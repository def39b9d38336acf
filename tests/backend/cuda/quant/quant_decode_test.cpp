// The decoding the quantized CUDA kernels run (backend/cuda/quant/quant_decode.cuh, host and
// device code alike: per element, and per 16-byte piece as the decode kernel reads a row), over the
// packed form the uploader makes (2/3-bit repacked into 4-bit containers, 5/6-bit into 8-bit ones;
// 4-bit containers also in tensor-core tiles, affine_tiles.h; FP8 tile scales widened to f32),
// against the CPU's own dequantization (Weight::row_to_f32) bit for bit. No GPU needed.
#include "backend/cuda/quant/quant_decode.cuh"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "backend/cuda/quant/affine_tiles.h"
#include "backend/cuda/quant/quant_test_weights.h"

namespace qwenrt {
namespace {

cuda::QuantScale scale_type(WeightFormat f) {
  return f == WeightFormat::F32 ? cuda::QuantScale::F32 : f == WeightFormat::F16 ? cuda::QuantScale::F16 : cuda::QuantScale::BF16;
}

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// Row r's values as the decode kernel computes them: 16-byte pieces of four little-endian words,
// one scale (and bias) per piece (skinny_quant_gemm.cu's piece()).
template <cuda::QuantKind K>
std::vector<float> row_by_pieces(const cuda::QuantMatrix& m, int64_t r) {
  constexpr int kPer = cuda::quant::kPieceElements<K>;
  std::vector<float> out(static_cast<std::size_t>(m.cols));
  const auto* row = static_cast<const uint8_t*>(m.data) + r * m.row_bytes();
  for (int64_t i = 0; i < m.cols / kPer; ++i) {
    uint32_t w[4];
    std::memcpy(w, row + i * 16, 16);
    float scale = 0, bias = 0;
    cuda::quant::piece_scale_bias<K>(m, r, i * kPer, scale, bias);
    for (int j = 0; j < kPer; ++j) out[static_cast<std::size_t>(i * kPer + j)] = cuda::quant::piece_value<K>(w, j, scale, bias);
  }
  return out;
}

std::vector<float> row_by_pieces(const cuda::QuantMatrix& m, int64_t r) {
  switch (m.kind) {
    case cuda::QuantKind::Affine4: return row_by_pieces<cuda::QuantKind::Affine4>(m, r);
    case cuda::QuantKind::Affine8: return row_by_pieces<cuda::QuantKind::Affine8>(m, r);
    default: return row_by_pieces<cuda::QuantKind::Fp8>(m, r);
  }
}

// Every element of `w` decoded from the host packed form `m`, one at a time (the prompt-row and
// embedding kernels) and by 16-byte pieces (the decode kernel), equals row_to_f32's, bit for bit.
void expect_same_values(const Weight& w, const cuda::QuantMatrix& m, const std::string& what) {
  ASSERT_EQ(m.cols % m.elements_per_load(), 0) << what;
  std::vector<float> row(static_cast<std::size_t>(w.cols));
  int64_t mismatches = 0;
  for (int64_t r = 0; r < w.rows; ++r) {
    w.row_to_f32(r, row.data());
    const std::vector<float> pieces = row_by_pieces(m, r);
    for (int64_t c = 0; c < w.cols; ++c) {
      const float want = row[static_cast<std::size_t>(c)], got = cuda::quant::element(m, r, c), piece = pieces[static_cast<std::size_t>(c)];
      if ((bits_of(got) != bits_of(want) || bits_of(piece) != bits_of(want)) && mismatches++ < 5)
        ADD_FAILURE() << what << " (" << r << ", " << c << "): element " << got << ", by pieces " << piece << " vs the CPU's " << want;
    }
  }
  EXPECT_EQ(mismatches, 0) << what;
}

TEST(QuantDecode, AffineRepackedContainersMatchTheCpuDequantization) {
  std::mt19937 rng(11);
  for (int bits : {2, 3, 4, 5, 6, 8})
    for (int group : {32, 64, 128})
      for (WeightFormat sf : {WeightFormat::BF16, WeightFormat::F16, WeightFormat::F32}) {
        auto h = test::random_affine(7, 384, bits, group, sf, rng);
        const int container = affine_container_bits(bits);
        EXPECT_EQ(container, bits <= 4 ? 4 : 8);
        std::vector<uint8_t> packed(static_cast<std::size_t>(h.w.rows * h.w.cols * container / 8));
        for (int64_t r = 0; r < h.w.rows; ++r) repack_affine_row(h.w, r, container, packed.data() + r * h.w.cols * container / 8);
        if (container == bits) {
          EXPECT_EQ(packed, h.data) << "a " << bits << "-bit row repacked into its own width is the same bytes";
        }
        cuda::QuantMatrix m;
        m.kind = container == 4 ? cuda::QuantKind::Affine4 : cuda::QuantKind::Affine8;
        m.data = packed.data();
        m.rows = h.w.rows;
        m.cols = h.w.cols;
        m.group_size = group;
        m.scale_type = scale_type(sf);
        m.scales = h.w.quant.scales;
        m.biases = h.w.quant.biases;
        expect_same_values(h.w, m, "affine " + std::to_string(bits) + "-bit g" + std::to_string(group) + " " + std::string(weight_format_name(sf)));
        EXPECT_EQ(packed_parts(h.w, false).data, packed.size());
      }
}

// A row-major 4-bit or 8-bit matrix (`rows` of cols · bits / 8 bytes; scales and biases [rows,
// groups] of `value_bytes`) laid out in tensor-core tiles on the host by the layout functions, as
// the upload's tiling kernels lay it out on the device.
struct HostTiles {
  std::vector<uint8_t> fields;
  std::vector<std::byte> table;
};
HostTiles tile_on_host(const cuda::QuantMatrix& m, int value_bytes) {
  namespace at = cuda::affine_tiles;
  const int64_t groups = m.cols / m.group_size;
  HostTiles t;
  const int bits = m.container_bits();
  t.fields.assign(static_cast<std::size_t>(at::field_bytes(m.rows, m.cols, bits)), 0);
  t.table.assign(static_cast<std::size_t>(at::table_values(m.rows, groups) * value_bytes), std::byte{0});
  for (int64_t r = 0; r < m.rows; ++r) {
    for (int64_t c = 0; c < m.cols; ++c)
      for (int plane = 0; plane < at::planes(bits); ++plane) {
        const at::NibbleAt where = at::nibble_at(m.cols, bits, r, c, plane);
        t.fields[static_cast<std::size_t>(where.byte)] |= static_cast<uint8_t>((cuda::quant::field(m, r, c) >> (4 * plane) & 0xfu) << where.shift);
      }
    for (int64_t g = 0; g < groups; ++g) {
      const auto i = static_cast<std::size_t>(at::scale_index(groups, r, g)), from = static_cast<std::size_t>(r * groups + g);
      std::memcpy(&t.table[i * value_bytes], static_cast<const std::byte*>(m.scales) + from * value_bytes, static_cast<std::size_t>(value_bytes));
      std::memcpy(&t.table[(i + 1) * value_bytes], static_cast<const std::byte*>(m.biases) + from * value_bytes,
                  static_cast<std::size_t>(value_bytes));
    }
  }
  return t;
}

// Every element of a weight in tiles reads as in rows (and as the CPU dequantizes it), for every
// width (in 4-bit and 8-bit containers), group size and scale type, rows a multiple of 16 and not;
// the padding rows are zero fields, scales and biases; the upload sizes are the padded ones.
TEST(QuantDecode, TiledAffineElementsMatchTheRowMajorLayout) {
  namespace at = cuda::affine_tiles;
  std::mt19937 rng(14);
  for (int bits : {2, 3, 4, 5, 6, 8})
    for (int group : {32, 64, 128})
      for (WeightFormat sf : {WeightFormat::BF16, WeightFormat::F16, WeightFormat::F32})
        for (int64_t rows : {7, 37, 48}) {
          auto h = test::random_affine(rows, 384, bits, group, sf, rng);
          const int container = affine_container_bits(bits);
          std::vector<uint8_t> packed(static_cast<std::size_t>(rows * 384 * container / 8));
          for (int64_t r = 0; r < rows; ++r) repack_affine_row(h.w, r, container, packed.data() + r * 384 * container / 8);
          cuda::QuantMatrix m;
          m.kind = container == 8 ? cuda::QuantKind::Affine8 : cuda::QuantKind::Affine4;
          m.data = packed.data();
          m.rows = rows;
          m.cols = 384;
          m.group_size = group;
          m.scale_type = scale_type(sf);
          m.scales = h.w.quant.scales;
          m.biases = h.w.quant.biases;
          const int value_bytes = static_cast<int>(weight_element_bytes(sf));
          const HostTiles t = tile_on_host(m, value_bytes);
          cuda::QuantMatrix tiled = m;
          tiled.tiled = true;
          tiled.data = t.fields.data();
          tiled.scales = t.table.data();
          tiled.biases = nullptr;
          const std::string what = "tiled " + std::to_string(bits) + "-bit g" + std::to_string(group) + " " + std::string(weight_format_name(sf)) +
                                   ", " + std::to_string(rows) + " rows";
          expect_same_values(h.w, m, what + " (row-major)");
          int64_t mismatches = 0;
          for (int64_t r = 0; r < rows; ++r)
            for (int64_t c = 0; c < 384; ++c) mismatches += bits_of(cuda::quant::element(tiled, r, c)) != bits_of(cuda::quant::element(m, r, c));
          EXPECT_EQ(mismatches, 0) << what;
          // The padding rows of the last tile: zero fields, scales and biases.
          const int64_t groups = 384 / group;
          for (int64_t r = rows; r < at::tiles(rows) * at::kTileRows; ++r) {
            for (int64_t c = 0; c < 384; ++c) ASSERT_EQ(cuda::quant::field(tiled, r, c), 0u) << what << " padding row " << r;
            for (int64_t g = 0; g < groups; ++g) {
              const int64_t i = at::scale_index(groups, r, g);
              ASSERT_EQ(cuda::quant::load_scale(tiled.scales, tiled.scale_type, i), 0.0f) << what;
              ASSERT_EQ(cuda::quant::load_scale(tiled.scales, tiled.scale_type, i + 1), 0.0f) << what;
            }
          }
          const PackedParts parts = packed_parts(h.w, true);
          EXPECT_EQ(parts.data, t.fields.size()) << what;
          EXPECT_EQ(parts.scales, t.table.size()) << what;
          EXPECT_EQ(parts.biases, 0u) << what;
          EXPECT_TRUE(uploads_tiled(h.w, true)) << what;
          EXPECT_FALSE(uploads_tiled(h.w, false)) << what;
          EXPECT_EQ(cuda::quant_matrix_bytes(tiled), static_cast<int64_t>(parts.data + parts.scales)) << what;
        }
  // Not tiled: columns not a multiple of 64.
  EXPECT_FALSE(uploads_tiled(test::random_affine(16, 96, 4, 32, WeightFormat::BF16, rng).w, true));
  EXPECT_FALSE(uploads_tiled(test::random_affine(16, 96, 8, 32, WeightFormat::BF16, rng).w, true));
}

// The tensor-core A fragments a lane makes from its words (affine_tiles.h low_pair less 128 and
// high_pair less 2176, in bf16, exactly) hold the fields the mma layout puts there: register p of
// step s of lane (g, t) is row g (p even) or g + 8 (p odd) at columns 16s + 4t + (0, 1) (p < 2) or
// + (2, 3), the lower column in the low half; a 4-bit field q as itself, an 8-bit one as q - 128
// (the sum of its two planes' fragments).
TEST(QuantDecode, AffineTileFragmentsHoldTheirFields) {
  namespace at = cuda::affine_tiles;
  std::mt19937 rng(15);
  for (int bits : {4, 8}) {
    auto h = test::random_affine(16, 128, bits, 64, WeightFormat::BF16, rng);
    cuda::QuantMatrix m;
    m.kind = bits == 8 ? cuda::QuantKind::Affine8 : cuda::QuantKind::Affine4;
    m.data = h.data.data();
    m.rows = 16;
    m.cols = 128;
    m.group_size = 64;
    m.scales = h.w.quant.scales;
    m.biases = h.w.quant.biases;
    const HostTiles t = tile_on_host(m, 2);
    auto word_at = [&](int64_t unit, int plane, int lane, int s) {
      uint32_t word;
      std::memcpy(&word, t.fields.data() + unit * at::unit_bytes(bits) + plane * at::kPlaneBytes + 16 * lane + 4 * s, 4);
      return word;
    };
    auto half_of = [](uint32_t pair, int half) { return cuda::quant::bf16_bits_to_f32(static_cast<uint16_t>(pair >> (16 * half))); };
    for (int64_t unit = 0; unit < 2; ++unit)
      for (int lane = 0; lane < 32; ++lane)
        for (int s = 0; s < 4; ++s) {
          const int g = lane / 4, tt = lane % 4;
          for (int p = 0; p < 4; ++p) {
            const uint32_t low = at::low_pair(word_at(unit, 0, lane, s), p);
            const int64_t row = g + (p % 2) * 8, col = unit * 64 + 16 * s + 4 * tt + (p / 2) * 2;
            for (int half = 0; half < 2; ++half) {
              float q = half_of(low, half) - half_of(at::kBf16Pair128, 0);
              if (bits == 8) q += half_of(at::high_pair(word_at(unit, 1, lane, s), p), half) - half_of(at::kBf16Pair2176, 0);
              const float expect = static_cast<float>(cuda::quant::field(m, row, col + half)) - (bits == 8 ? 128.0f : 0.0f);
              ASSERT_EQ(q, expect) << bits << "-bit lane " << lane << " step " << s << " register " << p;
            }
          }
        }
  }
}

TEST(QuantDecode, Fp8EveryCodeAndRowSlicesMatchTheCpuDequantization) {
  std::mt19937 rng(12);
  struct Case {
    int block_rows, block_cols;
    int64_t rows, cols, slice_begin, slice_rows;
  };
  // Qwen's 128x128 with partial blocks, DeepSeek-style non-square blocks, and row slices that
  // start inside a tile row.
  for (const Case& c :
       {Case{128, 128, 300, 320, 0, 300}, Case{128, 128, 300, 320, 130, 100}, Case{32, 64, 96, 192, 45, 40}, Case{16, 16, 40, 48, 3, 33}})
    for (WeightFormat sf : {WeightFormat::BF16, WeightFormat::F16, WeightFormat::F32}) {
      auto h = test::random_fp8(c.rows, c.cols, c.block_rows, c.block_cols, sf, rng, /*finite=*/false);
      const Weight w = h.w.row_slice(c.slice_begin, c.slice_rows);
      const std::vector<float> tiles = fp8_tile_scales(w);
      cuda::QuantMatrix m;
      m.kind = cuda::QuantKind::Fp8;
      m.data = w.data;
      m.rows = w.rows;
      m.cols = w.cols;
      m.scale_type = cuda::QuantScale::F32;
      m.scales = tiles.data();
      m.block_rows = c.block_rows;
      m.block_cols = c.block_cols;
      m.scale_cols = w.fp8.scale_cols;
      m.row_offset = fp8_device_row_offset(w);
      EXPECT_GE(m.row_offset, 0);
      EXPECT_LT(m.row_offset, c.block_rows);
      EXPECT_EQ(packed_parts(w, true).scales, tiles.size() * sizeof(float));
      expect_same_values(w, m,
                         "fp8 " + std::to_string(c.block_rows) + "x" + std::to_string(c.block_cols) + " rows from " + std::to_string(c.slice_begin));
    }
}

TEST(QuantDecode, E4m3AndHalfWideningAreExactForEveryCode) {
  for (uint32_t q = 0; q < 256; ++q) EXPECT_EQ(bits_of(cuda::quant::e4m3_to_f32(q)), bits_of(fp8_e4m3_to_f32(static_cast<uint8_t>(q)))) << q;
  for (uint32_t h = 0; h < 65536; ++h) {
    const float want = f16_to_f32(static_cast<uint16_t>(h));
    const float got = cuda::quant::f16_bits_to_f32(static_cast<uint16_t>(h));
    if (std::isnan(want)) EXPECT_TRUE(std::isnan(got)) << h;
    else EXPECT_EQ(bits_of(got), bits_of(want)) << h;
  }
}

TEST(QuantDecode, ShapesTheKernelsCannotTakeAreNamed) {
  std::mt19937 rng(13);
  auto h = test::random_fp8(32, 40, 16, 8, WeightFormat::BF16, rng);
  try {
    packed_parts(h.w, true);
    FAIL() << "an FP8 weight of 40 columns in 8-column blocks was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("multiples of 16"), std::string::npos) << e.what();
  }
}

float bf16_half(uint32_t pair, int half) { return cuda::quant::bf16_bits_to_f32(static_cast<uint16_t>(pair >> (16 * half))); }

// The bf16 pairs the tensor-core FP8 decode kernel builds from packed words, times 2^120, are the
// e4m3 values of their bytes exactly, for every code (subnormals and the NaN codes included).
TEST(QuantDecode, Fp8TensorCorePairsHoldTheExactValues) {
  const float two120 = cuda::quant::bf16_bits_to_f32(cuda::quant::kBf16Two120);
  std::mt19937 rng(5);
  for (int i = 0; i < 2000; ++i) {
    const uint32_t w = rng();
    for (int b = 0; b < 4; ++b) {
      const uint32_t pair = b % 2 == 0 ? cuda::quant::fp8_pair_02(w) : cuda::quant::fp8_pair_13(w);
      ASSERT_EQ(bf16_half(pair, b / 2) * two120, cuda::quant::e4m3_to_f32((w >> (8 * b)) & 255)) << std::hex << w << " byte " << b;
    }
  }
  for (uint32_t code = 0; code < 256; ++code) {
    const float want = cuda::quant::e4m3_to_f32(code);
    EXPECT_EQ(bf16_half(cuda::quant::fp8_pair_02(code | code << 16), 0) * two120, want) << code;
    EXPECT_EQ(bf16_half(cuda::quant::fp8_pair_13(code << 8 | code << 24), 1) * two120, want) << code;
  }
}

}  // namespace
}  // namespace qwenrt
