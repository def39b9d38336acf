#include "backend/cuda/deltanet/deltanet_prefill.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>

#include "backend/cuda/deltanet/deltanet_reference.h"
#include "backend/cuda/gpu_test_support.h"
#include "backend/cuda/runtime/runtime_options.h"
#include "backend/cuda/runtime/wgmma_probe.h"

namespace qwenrt {
namespace {

using test::DeltaNetLayer;
using test::kD;
using test::kK;
using test::relative_l2;

struct SpanCase {
  int rows, start_position, slot;
};

struct Errors {
  double out = 0, state = 0;  // worst relative L2 over rows / slots
};

// A window of spans through the chunked kernels against the CPU reference run row by row. Inputs,
// rings and states are random; rows are interleaved with padding so dense-row assumptions fail.
// out_bits / state_bits, where given, receive the output and the states as they came back.
Errors run_window(int nk, int nv, int n_slots, const std::vector<SpanCase>& cases, bool weak_decay, unsigned seed, int64_t out_pad = 16,
                  std::vector<uint16_t>* out_bits = nullptr, std::vector<float>* state_bits = nullptr) {
  std::mt19937 rng(seed);
  const DeltaNetLayer L = test::random_deltanet_layer(nk, nv, rng, weak_decay);
  std::vector<cuda::DeltaNetSpan> spans;
  int32_t T = 0;
  for (const auto& c : cases) {
    spans.push_back({T, c.rows, c.start_position, c.slot});
    T += c.rows;
  }
  const int64_t ld_qkv = L.conv_dim + 8, ld_z = L.value_dim + 4, ld_ba = 2 * nv + 3, ld_out = L.value_dim + out_pad;
  const int64_t conv_slot = kK * L.conv_dim + 12, rec_slot = int64_t{nv} * kD * kD + 4;
  std::vector<float> ring = test::random_f32(static_cast<std::size_t>(n_slots * conv_slot), rng);
  std::vector<float> state = test::random_f32(static_cast<std::size_t>(n_slots * rec_slot), rng, 0.3f);
  const std::vector<float> state0 = state;
  const auto qkv = test::random_f32(static_cast<std::size_t>(T * ld_qkv), rng);
  const auto z = test::random_f32(static_cast<std::size_t>(T * ld_z), rng);
  const auto b = test::random_f32(static_cast<std::size_t>(T * ld_ba), rng);
  auto a = test::random_f32(static_cast<std::size_t>(T * ld_ba), rng);
  a[0] = 30.0f;  // softplus above its threshold: the linear branch

  auto d_ring = test::to_device(ring), d_state = test::to_device(state);
  auto d_qkv = test::to_device(qkv), d_z = test::to_device(z), d_b = test::to_device(b), d_a = test::to_device(a);
  const test::DeltaNetDeviceLayer d_layer(L);
  cuda::DeviceBuffer d_out(static_cast<std::size_t>(T * ld_out) * sizeof(uint16_t));
  test::poison(d_out);
  const std::size_t ws_bytes = cuda::deltanet_prefill_workspace_bytes(spans, nk, nv);
  cuda::DeviceBuffer ws(ws_bytes);
  test::poison(ws);  // intermediates nobody wrote must not be read

  cuda::DeltaNetDecodeArgs args = d_layer.args(L);
  args.qkv = d_qkv.as<float>();
  args.ld_qkv = ld_qkv;
  args.z = d_z.as<float>();
  args.ld_z = ld_z;
  args.b = d_b.as<float>();
  args.a = d_a.as<float>() + nv + 1;  // b and a share a row stride, at different offsets
  args.ld_ba = ld_ba;
  args.conv_state = d_ring.as<float>();
  args.conv_slot_stride = conv_slot;
  args.rec_state = d_state.as<float>();
  args.rec_slot_stride = rec_slot;
  args.out = d_out.as<__nv_bfloat16>();
  args.ld_out = ld_out;
  cuda::deltanet_prefill(args, cuda::plan_deltanet_window(spans, nk, nv, ws.get(), ws_bytes, nullptr), nullptr);
  QWENRT_CUDA_CHECK(cudaDeviceSynchronize());

  Errors worst;
  const auto out = test::to_host<uint16_t>(d_out, static_cast<std::size_t>(T * ld_out));
  for (const auto& sp : spans) {
    for (int r = 0; r < sp.rows; ++r) {
      const int64_t row = sp.first_row + r;
      std::vector<float> ref_f;
      test::deltanet_reference_row(L, &qkv[row * ld_qkv], &z[row * ld_z], &b[row * ld_ba], &a[row * ld_ba + nv + 1], sp.start_position + r,
                                   &ring[sp.slot * conv_slot], &state[sp.slot * rec_slot], ref_f);
      std::vector<float> got(static_cast<std::size_t>(L.value_dim));
      for (int64_t j = 0; j < L.value_dim; ++j) got[j] = bf16_to_f32(out[row * ld_out + j]);
      const double e = relative_l2(got, std::vector<double>(ref_f.begin(), ref_f.end()));
      worst.out = std::max(worst.out, e);
      EXPECT_LT(e, 4e-3) << "row " << r << " of the span in slot " << sp.slot;
      for (int64_t j = L.value_dim; j < ld_out; ++j) EXPECT_EQ(out[row * ld_out + j], 0xffff) << "padding of output row " << row << " was written";
    }
  }
  // The ring is a copy of inputs: bitwise. Used states within the error of the bf16 products
  // (hi/lo splits where one rounding is not enough); unused slots and the padding after each state
  // untouched.
  const auto got_ring = test::to_host<float>(d_ring, ring.size());
  EXPECT_EQ(0, std::memcmp(got_ring.data(), ring.data(), ring.size() * sizeof(float))) << "conv rings";
  const auto got_state = test::to_host<float>(d_state, state.size());
  const int64_t used_floats = int64_t{nv} * kD * kD;
  for (int s = 0; s < n_slots; ++s) {
    const auto first = static_cast<std::ptrdiff_t>(s * rec_slot);
    const bool used = std::any_of(spans.begin(), spans.end(), [&](const auto& sp) { return sp.slot == s; });
    if (!used) {
      EXPECT_TRUE(std::equal(got_state.begin() + first, got_state.begin() + first + rec_slot, state0.begin() + first))
          << "unused slot " << s << " changed";
      continue;
    }
    const std::vector<float> g(got_state.begin() + first, got_state.begin() + first + used_floats);
    const std::vector<double> r(state.begin() + first, state.begin() + first + used_floats);
    const double e = relative_l2(g, r);
    worst.state = std::max(worst.state, e);
    EXPECT_LT(e, 2e-3) << "state of slot " << s;
    EXPECT_TRUE(std::equal(got_state.begin() + first + used_floats, got_state.begin() + first + rec_slot, state0.begin() + first + used_floats))
        << "padding after the state of slot " << s << " was written";
  }
  std::printf("[ deltanet prefill nk %d nv %d%s ] worst output rel L2 %.2e, worst state rel L2 %.2e\n", nk, nv, weak_decay ? " weak decay" : "",
              worst.out, worst.state);
  if (out_bits) *out_bits = out;
  if (state_bits) *state_bits = got_state;
  return worst;
}

// Spans that start fresh (the ring's garbage must read as zeros), start at 2 (< K−1), start deep in
// a sequence; one row, a partial chunk, exactly a chunk, several chunks with a partial tail.
const std::vector<SpanCase> kMixed = {{1, 0, 3}, {64, 5, 0}, {150, 0, 5}, {3, 2, 1}, {70, 300, 6}};

TEST(DeltaNetPrefill, MatchesCpuRowByRowOneValueHeadPerKeyHead) {
  QWENRT_REQUIRE_GPU();
  run_window(2, 2, 8, kMixed, false, 21);
}

TEST(DeltaNetPrefill, MatchesCpuRowByRowThreeValueHeadsPerKeyHead) {
  QWENRT_REQUIRE_GPU();
  run_window(2, 6, 8, kMixed, false, 22);
}

// Gates near 1: the state carries across many chunks, so chunk-to-chunk errors would accumulate.
TEST(DeltaNetPrefill, MatchesCpuRowByRowWithWeakDecayOverManyChunks) {
  QWENRT_REQUIRE_GPU();
  run_window(1, 2, 2, {{1000, 0, 1}, {129, 7, 0}}, true, 23);
}

// An odd output row stride: rows start at any bf16 boundary, so the 16-byte row writes give way.
TEST(DeltaNetPrefill, MatchesCpuRowByRowWithAnOddOutputStride) {
  QWENRT_REQUIRE_GPU();
  run_window(2, 4, 8, kMixed, false, 25, 3);
}

TEST(DeltaNetPrefill, MatchesCpuRowByRowAt27BShapes) {
  QWENRT_REQUIRE_GPU();
  run_window(16, 48, 3, {{200, 0, 2}, {65, 1000, 0}}, true, 24);
}

// Blocks of 64 state columns (value heads >= 32) on warpgroup products (RuntimeOptions::state_wgmma)
// against the mma.sync kernel on the same window: each within the bounds against the CPU, the
// same bits run to run, and the two within f32 rounding of each other (the same products in the
// same order per accumulator: the CPU emulator of both gives the same bits).
TEST(DeltaNetPrefill, StateOnWarpgroupProductsMatchesMmaSync) {
  QWENRT_REQUIRE_GPU();
  if (!cuda::wgmma_available()) GTEST_SKIP() << "no sm_90a code for this GPU";
  struct Case {
    int nk, nv, slots;
    std::vector<SpanCase> spans;
    bool weak;
    unsigned seed;
  };
  const std::vector<Case> cases = {
      {2, 32, 8, kMixed, false, 27}, {1, 32, 2, {{1000, 0, 1}, {129, 7, 0}}, true, 28}, {16, 48, 3, {{200, 0, 2}, {65, 1000, 0}}, true, 29}};
  cuda::RuntimeOptions on_wgmma = cuda::runtime_options(), on_mma = on_wgmma;
  on_wgmma.state_wgmma = true;
  on_mma.state_wgmma = false;
  for (const Case& c : cases) {
    std::vector<uint16_t> out_w, out_w2, out_m;
    std::vector<float> state_w, state_w2, state_m;
    {
      const cuda::ScopedRuntimeOptions options(on_wgmma);
      run_window(c.nk, c.nv, c.slots, c.spans, c.weak, c.seed, 16, &out_w, &state_w);
      run_window(c.nk, c.nv, c.slots, c.spans, c.weak, c.seed, 16, &out_w2, &state_w2);
    }
    {
      const cuda::ScopedRuntimeOptions options(on_mma);
      run_window(c.nk, c.nv, c.slots, c.spans, c.weak, c.seed, 16, &out_m, &state_m);
    }
    EXPECT_TRUE(out_w == out_w2 && state_w == state_w2) << "wgmma state kernel: two runs differ";
    std::vector<float> ow(out_w.size()), om(out_m.size());
    for (std::size_t i = 0; i < out_w.size(); ++i) {
      ow[i] = out_w[i] == 0xffff ? 0.0f : bf16_to_f32(out_w[i]);  // padding (NaN) as zero
      om[i] = out_m[i] == 0xffff ? 0.0f : bf16_to_f32(out_m[i]);
    }
    const double out_diff = relative_l2(ow, std::vector<double>(om.begin(), om.end()));
    const double state_diff = relative_l2(state_w, std::vector<double>(state_m.begin(), state_m.end()));
    std::printf("[ deltanet prefill nk %d nv %d ] wgmma vs mma.sync state kernel: output rel L2 %.2e, states %.2e%s\n", c.nk, c.nv, out_diff,
                state_diff, out_w == out_m && state_w == state_m ? " (same bits)" : "");
    EXPECT_LT(out_diff, 1e-3);
    EXPECT_LT(state_diff, 1e-5);
  }
}

// `output` runs beside `state`, each of its blocks waiting on a counter for its chunk: a missing
// wait or an early signal would read a snapshot half written, and show as runs that differ. The
// same window at 27B shapes, run five times from the same inputs, gives the same bits every time.
TEST(DeltaNetPrefill, RepeatsBitForBitAt27BShapes) {
  QWENRT_REQUIRE_GPU();
  const int nk = 16, nv = 48;
  std::mt19937 rng(26);
  const DeltaNetLayer L = test::random_deltanet_layer(nk, nv, rng, true);
  const std::vector<cuda::DeltaNetSpan> spans = {{0, 1000, 0, 0}, {1000, 300, 70, 1}};
  const int64_t T = 1300, conv_slot = kK * L.conv_dim, rec_slot = int64_t{nv} * kD * kD;
  const auto ring = test::random_f32(static_cast<std::size_t>(2 * conv_slot), rng);
  const auto state = test::random_f32(static_cast<std::size_t>(2 * rec_slot), rng, 0.3f);
  auto d_qkv = test::to_device(test::random_f32(static_cast<std::size_t>(T * L.conv_dim), rng));
  auto d_z = test::to_device(test::random_f32(static_cast<std::size_t>(T * L.value_dim), rng));
  auto d_ba = test::to_device(test::random_f32(static_cast<std::size_t>(T * 2 * nv), rng));
  auto d_ring = test::to_device(ring), d_state = test::to_device(state);
  const test::DeltaNetDeviceLayer d_layer(L);
  cuda::DeviceBuffer d_out(static_cast<std::size_t>(T * L.value_dim) * sizeof(uint16_t));
  const std::size_t ws_bytes = cuda::deltanet_prefill_workspace_bytes(spans, nk, nv);
  cuda::DeviceBuffer ws(ws_bytes);
  cuda::DeltaNetDecodeArgs args = d_layer.args(L);
  args.qkv = d_qkv.as<float>();
  args.ld_qkv = L.conv_dim;
  args.z = d_z.as<float>();
  args.ld_z = L.value_dim;
  args.b = d_ba.as<float>();
  args.a = d_ba.as<float>() + nv;
  args.ld_ba = 2 * nv;
  args.conv_state = d_ring.as<float>();
  args.conv_slot_stride = conv_slot;
  args.rec_state = d_state.as<float>();
  args.rec_slot_stride = rec_slot;
  args.out = d_out.as<__nv_bfloat16>();
  args.ld_out = L.value_dim;
  std::vector<uint16_t> first_out;
  std::vector<float> first_state;
  for (int run = 0; run < 5; ++run) {
    QWENRT_CUDA_CHECK(cudaMemcpy(d_ring.get(), ring.data(), ring.size() * sizeof(float), cudaMemcpyHostToDevice));
    QWENRT_CUDA_CHECK(cudaMemcpy(d_state.get(), state.data(), state.size() * sizeof(float), cudaMemcpyHostToDevice));
    test::poison(d_out);
    test::poison(ws);
    cuda::deltanet_prefill(args, cuda::plan_deltanet_window(spans, nk, nv, ws.get(), ws_bytes, nullptr), nullptr);
    QWENRT_CUDA_CHECK(cudaDeviceSynchronize());
    const auto out = test::to_host<uint16_t>(d_out, static_cast<std::size_t>(T * L.value_dim));
    const auto st = test::to_host<float>(d_state, state.size());
    if (run == 0) {
      first_out = out;
      first_state = st;
      continue;
    }
    EXPECT_EQ(0, std::memcmp(out.data(), first_out.data(), out.size() * sizeof(uint16_t))) << "outputs of run " << run;
    EXPECT_EQ(0, std::memcmp(st.data(), first_state.data(), st.size() * sizeof(float))) << "states of run " << run;
  }
}

TEST(DeltaNetPrefill, RejectsBadArguments) {
  QWENRT_REQUIRE_GPU();
  cuda::DeviceBuffer d(1 << 20);
  cuda::DeltaNetDecodeArgs ok;
  ok.qkv = ok.z = ok.b = ok.a = ok.conv_w = ok.neg_exp_a = ok.dt_bias = ok.norm_w = d.as<float>();
  ok.conv_state = ok.rec_state = d.as<float>();
  ok.out = d.as<__nv_bfloat16>();
  ok.nk = 1;
  ok.nv = 2;
  ok.dk = ok.dv = kD;
  ok.K = kK;
  ok.ld_qkv = 4 * kD;
  ok.ld_z = ok.ld_out = 2 * kD;
  ok.ld_ba = 2;
  ok.conv_slot_stride = kK * 4 * kD;
  ok.rec_slot_stride = 2 * kD * kD;
  const std::vector<cuda::DeltaNetSpan> spans = {{0, 10, 0, 0}};
  const std::size_t need = cuda::deltanet_prefill_workspace_bytes(spans, 1, 2);
  cuda::DeviceBuffer ws(need);
  const auto window = cuda::plan_deltanet_window(spans, 1, 2, ws.get(), need, nullptr);
  auto rejects = [&](auto&& change) {
    cuda::DeltaNetDecodeArgs bad = ok;
    change(bad);
    EXPECT_THROW(cuda::deltanet_prefill(bad, window, nullptr), Error);
  };
  rejects([](auto& a) { a.dk = 64; });
  rejects([](auto& a) { a.K = 3; });
  rejects([](auto& a) { a.nk = 2, a.nv = 3; });
  rejects([](auto& a) { a.nk = 2, a.nv = 4; });  // not the heads the window was planned for
  rejects([](auto& a) { a.ld_qkv = 4 * kD - 1; });
  rejects([](auto& a) { a.rec_slot_stride = 2 * kD * kD + 2; });
  rejects([](auto& a) { a.norm_w = nullptr; });
  auto rejects_window = [&](const std::vector<cuda::DeltaNetSpan>& sp, std::size_t bytes) {
    EXPECT_THROW(cuda::plan_deltanet_window(sp, 1, 2, ws.get(), bytes, nullptr), Error);
  };
  rejects_window({}, need);
  rejects_window({{0, 0, 0, 0}}, need);
  rejects_window({{0, 5, -1, 0}}, need);
  rejects_window({{0, 5, 0, 1}, {5, 5, 0, 1}}, need);
  rejects_window(spans, need - 1);
}

}  // namespace
}  // namespace qwenrt
