// Case 9: the quantized decode kernels (backend/cuda/quant/skinny_quant_gemm and the packed MoE
// experts, moe/moe_decode_packed, emulated) against double references over the exact values
// quant_decode.cuh gives each field: every format and piece size, 1 to 64 activation rows, a row
// alone or among 3, 8 or 40 vs among 64 bit for bit, an accumulated second weight; then packed experts in decode and,
// widened by moe_dequantize, in the grouped window path.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/moe/moe.h"
#include "backend/cuda/quant/affine_tiles.h"
#include "backend/cuda/quant/affine_tiling.h"
#include "backend/cuda/quant/dequantize_rows.h"
#include "backend/cuda/quant/quant_decode.cuh"
#include "backend/cuda/quant/skinny_quant_gemm.h"
#include "check_support.h"
#include "core/half.h"

namespace {

using namespace qwenrt::cuda;

struct Packed {
  std::vector<uint8_t> data;
  std::vector<uint16_t> scales16, biases16;
  std::vector<float> scales32, biases32;
  QuantMatrix m;
};

// rows x cols random fields with scales and biases of `scale_type` (affine, bits 4 or 8, groups of
// `group`) or f32 tile scales (FP8, block x block tiles; small = only the two smallest exponents).
Packed make(QuantKind kind, int64_t rows, int64_t cols, int group, std::mt19937& rng, bool small = false, QuantScale scale_type = QuantScale::BF16) {
  Packed p;
  p.m.kind = kind;
  p.m.rows = rows;
  p.m.cols = cols;
  p.data.resize(static_cast<std::size_t>(rows * p.m.row_bytes()));
  for (auto& b : p.data) {
    b = static_cast<uint8_t>(rng());
    if (kind == QuantKind::Fp8 && (b & 0x7f) == 0x7f) b &= 0xfe;
    if (small) b &= 0x8f;
  }
  std::uniform_real_distribution<float> u(0.5f, 2.0f);
  if (kind == QuantKind::Fp8) {
    p.m.block_rows = p.m.block_cols = group;
    p.m.scale_cols = (cols + group - 1) / group;
    p.scales32.resize(static_cast<std::size_t>((rows + group - 1) / group * p.m.scale_cols));
    for (auto& s : p.scales32) s = u(rng) / 448.0f * (small ? 64.0f : 1.0f);
    p.m.scales = p.scales32.data();
    p.m.scale_type = QuantScale::F32;
  } else {
    p.m.group_size = group;
    const int levels = kind == QuantKind::Affine4 ? 15 : 255;
    for (int64_t i = 0; i < rows * (cols / group); ++i) {
      const float scale = u(rng) * 0.1f / static_cast<float>(levels), bias = -0.05f * u(rng);
      if (scale_type == QuantScale::F32) {
        p.scales32.push_back(scale);
        p.biases32.push_back(bias);
      } else {
        p.scales16.push_back(scale_type == QuantScale::BF16 ? emu_f2bf(scale) : qwenrt::f32_to_f16(scale));
        p.biases16.push_back(scale_type == QuantScale::BF16 ? emu_f2bf(bias) : qwenrt::f32_to_f16(bias));
      }
    }
    const bool wide = scale_type == QuantScale::F32;
    p.m.scales = wide ? static_cast<const void*>(p.scales32.data()) : p.scales16.data();
    p.m.biases = wide ? static_cast<const void*>(p.biases32.data()) : p.biases16.data();
    p.m.scale_type = scale_type;
  }
  p.m.data = p.data.data();
  return p;
}

// A and b (rows of k columns, b accumulated onto a ramp) against double references, n = 64, 1, 3,
// 8, 12, 40 activation rows (above 8: launches of several n-tiles, the rows kernel 8 at a time);
// every row bit for bit as among 64.
int check_products(const char* name, const Packed& a, const Packed& b, std::mt19937& rng) {
  const int64_t rows = a.m.rows, rows2 = b.m.rows, k = a.m.cols, ldx = k + 8;
  constexpr int64_t kMost = 64;
  const auto x = random_bf16(static_cast<std::size_t>(kMost * ldx), rng);
  const int64_t ldy = rows + rows2 + 3;
  int failures = 0;
  std::vector<float> all;
  for (int64_t n : {kMost, int64_t{1}, int64_t{3}, int64_t{8}, int64_t{12}, int64_t{40}}) {
    std::vector<float> y(static_cast<std::size_t>(kMost * ldy), 0.0f);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t r = 0; r < rows2; ++r) y[static_cast<std::size_t>(i * ldy + rows + r)] = 0.25f * static_cast<float>(r);  // accumulated onto
    const QuantSegment segs[2] = {{a.m, y.data(), ldy, false}, {b.m, y.data() + rows, ldy, true}};
    skinny_quant_gemm(reinterpret_cast<const __nv_bfloat16*>(x.data()), n, k, ldx, segs, nullptr);
    std::vector<double> ref;
    std::vector<float> got;
    for (int64_t i = 0; i < n; ++i)
      for (int s = 0; s < 2; ++s) {
        const QuantMatrix& m = s == 0 ? a.m : b.m;
        for (int64_t r = 0; r < m.rows; ++r) {
          double acc = s == 1 ? 0.25 * static_cast<double>(r) : 0.0;
          for (int64_t c = 0; c < k; ++c) acc += static_cast<double>(emu_bf2f(x[static_cast<std::size_t>(i * ldx + c)])) * quant::element(m, r, c);
          ref.push_back(acc);
          got.push_back(y[static_cast<std::size_t>(i * ldy + (s == 0 ? 0 : rows) + r)]);
        }
      }
    const double err = rel_l2(got, ref);
    bool same = true;
    if (n == kMost) all = y;
    else
      for (int64_t i = 0; i < n; ++i)
        for (int64_t r = 0; r < rows + rows2; ++r) same &= y[static_cast<std::size_t>(i * ldy + r)] == all[static_cast<std::size_t>(i * ldy + r)];
    const bool ok = err <= 1e-6 && same;
    std::printf("  %-28s n=%lld rel_l2 %.2e vs double%s  %s\n", name, static_cast<long long>(n), err,
                n == kMost ? ""
                : same     ? ", same bits as among 64"
                           : ", DIFFERENT bits",
                ok ? "ok" : "FAIL");
    failures += !ok;
  }
  return failures;
}

int check_products(const char* name, QuantKind kind, int group, bool small = false) {
  std::mt19937 rng(7);
  const int64_t rows = 37, k = 512, rows2 = 16;  // 37: a partial tile
  Packed a = make(kind, rows, k, group, rng, small), b = make(kind, rows2, k, group, rng, small);
  return check_products(name, a, b, rng);
}

// ---- 4-bit and 8-bit weights in tensor-core tiles (affine_tiles.h) ------------------------------

// A row-major 4-bit or 8-bit weight laid out in tiles on the host with the layout functions: fields
// (a plane per nibble), then (scale, bias) pairs in the one table.
Packed tile_on_host(const Packed& p) {
  namespace at = affine_tiles;
  const int64_t rows = p.m.rows, cols = p.m.cols, groups = cols / p.m.group_size;
  Packed t;
  t.m = p.m;
  t.m.tiled = true;
  t.m.biases = nullptr;
  const int bits = p.m.container_bits();
  t.data.assign(static_cast<std::size_t>(at::field_bytes(rows, cols, bits)), 0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      for (int plane = 0; plane < at::planes(bits); ++plane) {
        const at::NibbleAt where = at::nibble_at(cols, bits, r, c, plane);
        t.data[static_cast<std::size_t>(where.byte)] |= static_cast<uint8_t>((quant::field(p.m, r, c) >> (4 * plane) & 0xfu) << where.shift);
      }
  const auto values = static_cast<std::size_t>(at::table_values(rows, groups));
  const bool wide = p.m.scale_type == QuantScale::F32;
  if (wide) t.scales32.assign(values, 0.0f);
  else t.scales16.assign(values, 0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t g = 0; g < groups; ++g) {
      const auto i = static_cast<std::size_t>(at::scale_index(groups, r, g)), from = static_cast<std::size_t>(r * groups + g);
      if (wide) t.scales32[i] = p.scales32[from], t.scales32[i + 1] = p.biases32[from];
      else t.scales16[i] = p.scales16[from], t.scales16[i + 1] = p.biases16[from];
    }
  t.m.data = t.data.data();
  t.m.scales = wide ? static_cast<const void*>(t.scales32.data()) : t.scales16.data();
  return t;
}

// The device's tiling kernels (the uploader's) make the host's bytes; a synthetic table has its
// constants on the real rows and zeros on the padding; every element reads the same in both layouts.
int check_tiling(const char* name, const Packed& p, const Packed& t) {
  namespace at = affine_tiles;
  const int64_t rows = p.m.rows, cols = p.m.cols, groups = cols / p.m.group_size;
  std::vector<uint8_t> fields(t.data.size(), 0xee);
  tile_affine_fields(p.data.data(), rows, cols, p.m.container_bits(), fields.data(), nullptr);
  const bool wide = p.m.scale_type == QuantScale::F32;
  std::vector<uint8_t> table(wide ? t.scales32.size() * 4 : t.scales16.size() * 2, 0xee);
  tile_affine_scales(p.m.scales, p.m.biases, wide ? 4 : 2, rows, groups, table.data(), nullptr);
  const bool same_fields = fields == t.data;
  const bool same_table = std::memcmp(table.data(), t.m.scales, table.size()) == 0;
  std::vector<uint16_t> synthetic(static_cast<std::size_t>(at::table_values(rows, groups)), 0xeeee);
  fill_affine_tile_scales_bf16(synthetic.data(), rows, groups, 0x1234, 0x5678, nullptr);
  bool synthetic_ok = true;
  for (int64_t r = 0; r < at::tiles(rows) * at::kTileRows; ++r)
    for (int64_t g = 0; g < groups; ++g) {
      const auto i = static_cast<std::size_t>(at::scale_index(groups, r, g));
      synthetic_ok &= synthetic[i] == (r < rows ? 0x1234 : 0) && synthetic[i + 1] == (r < rows ? 0x5678 : 0);
    }
  int64_t differ = 0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) differ += quant::element(t.m, r, c) != quant::element(p.m, r, c);
  const bool ok = same_fields && same_table && synthetic_ok && differ == 0;
  std::printf("  %-28s tiling kernels %s, synthetic table %s, elements %s  %s\n", name, same_fields && same_table ? "= host tiles" : "DIFFER",
              synthetic_ok ? "ok" : "WRONG", differ == 0 ? "= row-major" : "DIFFER", ok ? "ok" : "FAIL");
  return !ok;
}

// The prompt path's tiled dequantization: rows [r0, r0 + count) to bf16, each fma(s, q, b) rounded
// once, as from the row-major form (whole tiles, the partial last tile, a start inside a tile).
int check_tiled_dequantize(const char* name, const Packed& p, const Packed& t) {
  const int64_t cols = p.m.cols;
  bool ok = true;
  for (const auto [r0, count] : {std::pair<int64_t, int64_t>{0, 37}, {16, 21}, {5, 20}}) {
    std::vector<uint16_t> out(static_cast<std::size_t>(count * cols), 0xeeee);
    dequantize_rows(t.m, r0, count, reinterpret_cast<__nv_bfloat16*>(out.data()), nullptr);
    for (int64_t r = 0; r < count; ++r)
      for (int64_t c = 0; c < cols; ++c) ok &= out[static_cast<std::size_t>(r * cols + c)] == emu_f2bf(quant::element(p.m, r0 + r, c));
  }
  std::printf("  %-28s tiled prompt-row dequantization %s\n", name, ok ? "= row-major values  ok" : "DIFFERS  FAIL");
  return !ok;
}

// The launch's depth (units a lane has in flight) follows its blocks: 4 tiles fit the emulated
// GPU at once (mock cuda_runtime_api.h), 6 do not. A's rows: the same bits either way.
int check_tiled_depths(const char* name, const Packed& ta, const Packed& tc, std::mt19937& rng) {
  const int64_t k = ta.m.cols, ldy = ta.m.rows + tc.m.rows;
  const auto x = random_bf16(static_cast<std::size_t>(8 * k), rng);
  std::vector<float> alone(static_cast<std::size_t>(8 * ldy)), beside(alone.size());
  const QuantSegment one[1] = {{ta.m, alone.data(), ldy, false}};
  const QuantSegment two[2] = {{ta.m, beside.data(), ldy, false}, {tc.m, beside.data() + ta.m.rows, ldy, false}};
  skinny_quant_gemm(reinterpret_cast<const __nv_bfloat16*>(x.data()), 8, k, k, one, nullptr);
  skinny_quant_gemm(reinterpret_cast<const __nv_bfloat16*>(x.data()), 8, k, k, two, nullptr);
  bool same = true;
  for (int64_t i = 0; i < 8; ++i)
    for (int64_t r = 0; r < ta.m.rows; ++r) same &= alone[static_cast<std::size_t>(i * ldy + r)] == beside[static_cast<std::size_t>(i * ldy + r)];
  std::printf("  %-28s 3 tiles (one wave, deepest batch) vs 6 (two waves, shallowest): %s\n", name, same ? "same bits  ok" : "DIFFERENT bits  FAIL");
  return !same;
}

int check_tiled(const char* name, QuantKind kind, int group, QuantScale scale_type) {
  std::mt19937 rng(17);
  // 37 rows: a partial tile. 76 units of 64 columns: every warp has several batches of chunks, the
  // last one partial, and not all warps the same number.
  const int64_t rows = 37, k = 4864, rows2 = 16, rows3 = 48;
  const Packed a = make(kind, rows, k, group, rng, false, scale_type), b = make(kind, rows2, k, group, rng, false, scale_type),
               c = make(kind, rows3, k, group, rng, false, scale_type);
  const Packed ta = tile_on_host(a), tb = tile_on_host(b), tc = tile_on_host(c);
  return check_tiling(name, a, ta) + check_tiled_dequantize(name, a, ta) + check_products(name, ta, tb, rng) + check_tiled_depths(name, ta, tc, rng);
}

// FP8 takes a deep or a shallow form by the same rule (skinny_quant_fp8.cu launch()).
int check_fp8_depths(const char* name, int block) {
  std::mt19937 rng(19);
  const Packed a = make(QuantKind::Fp8, 37, 1024, block, rng), c = make(QuantKind::Fp8, 48, 1024, block, rng);
  return check_tiled_depths(name, a, c, rng);
}

float silu(float g) { return g / (1.0f + std::exp(-g)); }

// Batches of more than 8 rows grouped by expert (moe_decode_grouped): 21 rows over 6 experts (each
// chosen by several runs' worth of pairs, the shared one by all 21), against moe_decode 8 rows a
// launch, bit for bit, overwritten and accumulated.
int check_packed_moe_grouped(const char* name, const MoeExperts& ex, std::mt19937& rng) {
  const int64_t H = ex.hidden, rows = 21, E = ex.experts;
  const auto x = random_bf16(static_cast<std::size_t>(rows * H), rng);
  std::vector<int32_t> ids;
  std::vector<float> weights;
  for (int64_t r = 0; r < rows; ++r) {
    const int e0 = static_cast<int>(rng() % E), e1 = static_cast<int>((e0 + 1 + rng() % (E - 1)) % E);
    ids.insert(ids.end(), {e0, e1, static_cast<int32_t>(E)});
    weights.insert(weights.end(), {0.55f + 0.01f * static_cast<float>(r), 0.45f, 0.25f});
  }
  const auto* xb = reinterpret_cast<const __nv_bfloat16*>(x.data());
  std::vector<float> y0(static_cast<std::size_t>(rows * H));
  for (std::size_t i = 0; i < y0.size(); ++i) y0[i] = 0.01f * static_cast<float>(static_cast<int>(i % 97) - 48);
  std::vector<uint16_t> act(moe_decode_act_bytes(8, ex) / 2);
  std::vector<uint8_t> scratch(moe_decode_grouped_scratch_bytes(rows, ex) + 16);
  bool same = true;
  double norm = 0;
  for (const bool accumulate : {false, true}) {
    std::vector<float> want = y0, got = y0;
    for (int64_t r0 = 0; r0 < rows; r0 += 8)
      moe_decode(xb + r0 * H, H, std::min<int64_t>(8, rows - r0), ex, ids.data() + r0 * ex.slots, weights.data() + r0 * ex.slots,
                 reinterpret_cast<__nv_bfloat16*>(act.data()), want.data() + r0 * H, H, accumulate, nullptr);
    std::fill(scratch.begin(), scratch.end(), uint8_t{0xff});
    moe_decode_grouped(xb, H, rows, ex, ids.data(), weights.data(), scratch.data(), got.data(), H, accumulate, nullptr);
    for (std::size_t i = 0; i < want.size(); ++i) {
      same &= std::memcmp(&want[i], &got[i], 4) == 0;
      norm += static_cast<double>(want[i]) * want[i];
    }
  }
  const bool ok = same && norm > 0;
  std::printf("  %-28s packed experts, 21 rows grouped by expert: %s moe_decode's bits  %s\n", name, same ? "the same as" : "NOT", ok ? "ok" : "FAIL");
  return !ok;
}

int check_packed_moe(const char* name, QuantKind kind, int group) {
  std::mt19937 rng(11);
  const int E = 6, top = 2;
  const int64_t H = 128, I = 64, rows = 5, stacked = E + 1;
  Packed gu = make(kind, stacked * 2 * I, H, group, rng), dn = make(kind, stacked * H, I, group, rng);
  MoeExperts ex;
  ex.experts = E;
  ex.top_k = top;
  ex.shared = true;
  ex.hidden = H;
  ex.inter = I;
  ex.slots = top + 1;
  ex.packed = true;
  ex.gate_up_packed = gu.m;
  ex.down_packed = dn.m;
  const auto x = random_bf16(static_cast<std::size_t>(rows * H), rng);
  std::vector<int32_t> ids;
  std::vector<float> weights;
  for (int64_t r = 0; r < rows; ++r) {
    const int e0 = static_cast<int>(rng() % E), e1 = (e0 + 1 + static_cast<int>(rng() % (E - 1))) % E;
    ids.insert(ids.end(), {e0, e1, E});
    weights.insert(weights.end(), {0.6f, 0.4f, 0.3f});
  }
  // The reference: act rounded to bf16 as the kernels round it, sums in double.
  std::vector<double> ref(static_cast<std::size_t>(rows * H), 0.0);
  for (int64_t r = 0; r < rows; ++r)
    for (int s = 0; s < ex.slots; ++s) {
      const int64_t e = ids[static_cast<std::size_t>(r * ex.slots + s)];
      std::vector<float> act(static_cast<std::size_t>(I));
      for (int64_t j = 0; j < I; ++j) {
        double g = 0, u = 0;
        for (int64_t c = 0; c < H; ++c) {
          const double xv = emu_bf2f(x[static_cast<std::size_t>(r * H + c)]);
          g += xv * quant::element(gu.m, e * 2 * I + j, c);
          u += xv * quant::element(gu.m, e * 2 * I + I + j, c);
        }
        act[static_cast<std::size_t>(j)] = emu_bf2f(emu_f2bf(silu(static_cast<float>(g)) * static_cast<float>(u)));
      }
      for (int64_t d = 0; d < H; ++d) {
        double acc = 0;
        for (int64_t j = 0; j < I; ++j) acc += static_cast<double>(act[static_cast<std::size_t>(j)]) * quant::element(dn.m, e * H + d, j);
        ref[static_cast<std::size_t>(r * H + d)] += weights[static_cast<std::size_t>(r * ex.slots + s)] * acc;
      }
    }
  int failures = 0;
  std::vector<uint16_t> act(moe_decode_act_bytes(rows, ex) / 2);
  std::vector<float> y(static_cast<std::size_t>(rows * H));
  moe_decode(reinterpret_cast<const __nv_bfloat16*>(x.data()), H, rows, ex, ids.data(), weights.data(), reinterpret_cast<__nv_bfloat16*>(act.data()),
             y.data(), H, false, nullptr);
  const double err = rel_l2(y, ref);
  // Row 3 alone: the same bits.
  std::vector<float> alone(static_cast<std::size_t>(H));
  moe_decode(reinterpret_cast<const __nv_bfloat16*>(x.data()) + 3 * H, H, 1, ex, ids.data() + 3 * ex.slots, weights.data() + 3 * ex.slots,
             reinterpret_cast<__nv_bfloat16*>(act.data()), alone.data(), H, false, nullptr);
  bool same = true;
  for (int64_t d = 0; d < H; ++d) same &= alone[static_cast<std::size_t>(d)] == y[static_cast<std::size_t>(3 * H + d)];
  const bool ok = err <= 2e-3 && same;
  std::printf("  %-28s packed experts, decode: rel_l2 %.2e vs double, row alone %s  %s\n", name, err, same ? "same bits" : "DIFFERENT",
              ok ? "ok" : "FAIL");
  failures += !ok;
  // Windows: the stacks widened to bf16, then the grouped path (weights rounded to bf16: looser).
  std::vector<uint8_t> wide(moe_dequantized_bytes(ex) + 16);
  const MoeExperts grouped = moe_dequantize(ex, wide.data(), nullptr);
  std::vector<uint8_t> scratch(moe_window_scratch_bytes(rows, grouped) + 16);
  std::vector<float> yw(static_cast<std::size_t>(rows * H));
  moe_window(reinterpret_cast<const __nv_bfloat16*>(x.data()), H, rows, grouped, ids.data(), weights.data(), scratch.data(), yw.data(), H, false,
             nullptr);
  const double werr = rel_l2(yw, ref);
  std::printf("  %-28s packed experts, window via bf16 stacks: rel_l2 %.2e vs double  %s\n", name, werr, werr <= 2e-2 ? "ok" : "FAIL");
  failures += werr > 2e-2;
  failures += check_packed_moe_grouped(name, ex, rng);
  return failures;
}

}  // namespace

int quant_check() {
  std::printf("case 9: quantized decode products and packed experts\n");
  int failures = 0;
  failures += check_products("affine 4-bit g32", QuantKind::Affine4, 32);
  failures += check_products("affine 4-bit g64", QuantKind::Affine4, 64);
  failures += check_products("affine 4-bit g128", QuantKind::Affine4, 128);
  failures += check_tiled("affine 4-bit tiles g32 bf16", QuantKind::Affine4, 32, QuantScale::BF16);
  failures += check_tiled("affine 4-bit tiles g64 bf16", QuantKind::Affine4, 64, QuantScale::BF16);
  failures += check_tiled("affine 4-bit tiles g128 f16", QuantKind::Affine4, 128, QuantScale::F16);
  failures += check_tiled("affine 4-bit tiles g64 f32", QuantKind::Affine4, 64, QuantScale::F32);
  failures += check_tiled("affine 4-bit tiles g32 f32", QuantKind::Affine4, 32, QuantScale::F32);
  failures += check_tiled("affine 8-bit tiles g32 bf16", QuantKind::Affine8, 32, QuantScale::BF16);
  failures += check_tiled("affine 8-bit tiles g64 bf16", QuantKind::Affine8, 64, QuantScale::BF16);
  failures += check_tiled("affine 8-bit tiles g128 f16", QuantKind::Affine8, 128, QuantScale::F16);
  failures += check_tiled("affine 8-bit tiles g64 f32", QuantKind::Affine8, 64, QuantScale::F32);
  failures += check_tiled("affine 8-bit tiles g32 f32", QuantKind::Affine8, 32, QuantScale::F32);
  failures += check_products("affine 8-bit g32", QuantKind::Affine8, 32);
  failures += check_products("affine 8-bit g64", QuantKind::Affine8, 64);
  failures += check_products("affine 8-bit g128", QuantKind::Affine8, 128);
  failures += check_products("fp8 128x128", QuantKind::Fp8, 128);
  failures += check_products("fp8 32x32", QuantKind::Fp8, 32);
  failures += check_products("fp8 16x16 small codes", QuantKind::Fp8, 16, true);
  failures += check_fp8_depths("fp8 128x128", 128);
  failures += check_fp8_depths("fp8 32x32", 32);
  failures += check_packed_moe("affine 4-bit g64", QuantKind::Affine4, 64);
  failures += check_packed_moe("affine 8-bit g32", QuantKind::Affine8, 32);
  failures += check_packed_moe("fp8 64x64", QuantKind::Fp8, 64);
  return failures;
}
