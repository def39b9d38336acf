// Case 9: the quantized decode kernels (backend/cuda/quant/skinny_quant_gemm and the packed MoE
// experts, moe/moe_decode_packed, emulated) against double references over the exact values
// quant_decode.cuh gives each field: every format and piece size, 1 to 8 activation rows, a row
// alone vs among 8 bit for bit, an accumulated second weight; then packed experts in decode and,
// widened by moe_dequantize, in the grouped window path.
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/moe/moe.h"
#include "check_support.h"
#include "backend/cuda/quant/quant_decode.cuh"
#include "backend/cuda/quant/skinny_quant_gemm.h"

namespace {

using namespace qwenrt::cuda;

struct Packed {
  std::vector<uint8_t> data;
  std::vector<uint16_t> scales16, biases16;
  std::vector<float> scales32;
  QuantMatrix m;
};

// rows x cols random fields with bf16 scales and biases (affine, bits 4 or 8, groups of `group`) or
// f32 tile scales (FP8, block x block tiles; small = only the two smallest exponents).
Packed make(QuantKind kind, int64_t rows, int64_t cols, int group, std::mt19937& rng, bool small = false) {
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
      p.scales16.push_back(emu_f2bf(u(rng) * 0.1f / static_cast<float>(levels)));
      p.biases16.push_back(emu_f2bf(-0.05f * u(rng)));
    }
    p.m.scales = p.scales16.data();
    p.m.biases = p.biases16.data();
    p.m.scale_type = QuantScale::BF16;
  }
  p.m.data = p.data.data();
  return p;
}

int check_products(const char* name, QuantKind kind, int group, bool small = false) {
  std::mt19937 rng(7);
  const int64_t rows = 37, k = 512, ldx = 520, rows2 = 16;  // 37: a partial tile
  Packed a = make(kind, rows, k, group, rng, small), b = make(kind, rows2, k, group, rng, small);
  const auto x = random_bf16(static_cast<std::size_t>(8 * ldx), rng);
  const int64_t ldy = rows + rows2 + 3;
  int failures = 0;
  std::vector<float> all;
  for (int64_t n : {8, 1, 3}) {
    std::vector<float> y(static_cast<std::size_t>(8 * ldy), 0.0f);
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
    if (n == 8) all = y;
    else
      for (int64_t i = 0; i < n; ++i)
        for (int64_t r = 0; r < rows + rows2; ++r) same &= y[static_cast<std::size_t>(i * ldy + r)] == all[static_cast<std::size_t>(i * ldy + r)];
    const bool ok = err <= 1e-6 && same;
    std::printf("  %-22s n=%lld rel_l2 %.2e vs double%s  %s\n", name, static_cast<long long>(n), err, n == 8 ? "" : same ? ", same bits as among 8" : ", DIFFERENT bits",
                ok ? "ok" : "FAIL");
    failures += !ok;
  }
  return failures;
}

float silu(float g) { return g / (1.0f + std::exp(-g)); }

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
  std::printf("  %-22s packed experts, decode: rel_l2 %.2e vs double, row alone %s  %s\n", name, err, same ? "same bits" : "DIFFERENT", ok ? "ok" : "FAIL");
  failures += !ok;
  // Windows: the stacks widened to bf16, then the grouped path (weights rounded to bf16: looser).
  std::vector<uint8_t> wide(moe_dequantized_bytes(ex) + 16);
  const MoeExperts grouped = moe_dequantize(ex, wide.data(), nullptr);
  std::vector<uint8_t> scratch(moe_window_scratch_bytes(rows, grouped) + 16);
  std::vector<float> yw(static_cast<std::size_t>(rows * H));
  moe_window(reinterpret_cast<const __nv_bfloat16*>(x.data()), H, rows, grouped, ids.data(), weights.data(), scratch.data(), yw.data(), H, false, nullptr);
  const double werr = rel_l2(yw, ref);
  std::printf("  %-22s packed experts, window via bf16 stacks: rel_l2 %.2e vs double  %s\n", name, werr, werr <= 2e-2 ? "ok" : "FAIL");
  failures += werr > 2e-2;
  return failures;
}

}  // namespace

int quant_check() {
  std::printf("case 9: quantized decode products and packed experts\n");
  int failures = 0;
  failures += check_products("affine 4-bit g32", QuantKind::Affine4, 32);
  failures += check_products("affine 4-bit g64", QuantKind::Affine4, 64);
  failures += check_products("affine 4-bit g128", QuantKind::Affine4, 128);
  failures += check_products("affine 8-bit g32", QuantKind::Affine8, 32);
  failures += check_products("affine 8-bit g64", QuantKind::Affine8, 64);
  failures += check_products("affine 8-bit g128", QuantKind::Affine8, 128);
  failures += check_products("fp8 128x128", QuantKind::Fp8, 128);
  failures += check_products("fp8 32x32", QuantKind::Fp8, 32);
  failures += check_products("fp8 16x16 small codes", QuantKind::Fp8, 16, true);
  failures += check_packed_moe("affine 4-bit g64", QuantKind::Affine4, 64);
  failures += check_packed_moe("affine 8-bit g32", QuantKind::Affine8, 32);
  failures += check_packed_moe("fp8 64x64", QuantKind::Fp8, 64);
  return failures;
}
