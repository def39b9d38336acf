#include "backend/cuda/deltanet/deltanet_decode.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "backend/cuda/deltanet/deltanet_reference.h"
#include "backend/cuda/gpu_test_support.h"

namespace qwenrt {
namespace {

using test::DeltaNetLayer;
using test::kD;
using test::kK;
using test::relative_l2;

// B sequences in cache slots `slots` (of n_slots), starting at `start` positions, decoded for
// `steps` consecutive rows; every step checks the bf16 output, the recurrent state and the ring.
void run_steps(int nk, int nv, int n_slots, const std::vector<int32_t>& slots, const std::vector<int64_t>& start, int steps, unsigned seed) {
  std::mt19937 rng(seed);
  const DeltaNetLayer L = test::random_deltanet_layer(nk, nv, rng);
  const int B = static_cast<int>(slots.size());
  // Padded row strides, so a kernel that assumes dense rows fails.
  const int64_t ld_qkv = L.conv_dim + 8, ld_z = L.value_dim + 4, ld_ba = nv + 3, ld_out = L.value_dim + 16;
  const int64_t conv_slot = kK * L.conv_dim + 12, rec_slot = int64_t{nv} * kD * kD + 4;

  // Every slot's ring and state start random and nonzero: a row at position < K−1 must read zeros
  // for the negative positions whatever its ring holds, and untouched slots must stay as they were.
  std::vector<float> ring = test::random_f32(static_cast<std::size_t>(n_slots * conv_slot), rng);
  std::vector<float> state = test::random_f32(static_cast<std::size_t>(n_slots * rec_slot), rng, 0.3f);
  const std::vector<float> state0 = state;
  auto d_ring = test::to_device(ring), d_state = test::to_device(state);
  const test::DeltaNetDeviceLayer d_layer(L);
  auto d_slots = test::to_device(slots);
  cuda::DeviceBuffer d_qkv(static_cast<std::size_t>(B * ld_qkv) * sizeof(float)), d_z(static_cast<std::size_t>(B * ld_z) * sizeof(float));
  cuda::DeviceBuffer d_b(static_cast<std::size_t>(B * ld_ba) * sizeof(float)), d_a(static_cast<std::size_t>(B * ld_ba) * sizeof(float));
  cuda::DeviceBuffer d_pos(static_cast<std::size_t>(B) * sizeof(int64_t));
  cuda::DeviceBuffer d_out(static_cast<std::size_t>(B * ld_out) * sizeof(uint16_t));

  for (int step = 0; step < steps; ++step) {
    std::vector<int64_t> pos(static_cast<std::size_t>(B));
    for (int i = 0; i < B; ++i) pos[i] = start[i] + step;
    auto qkv = test::random_f32(static_cast<std::size_t>(B * ld_qkv), rng);
    auto z = test::random_f32(static_cast<std::size_t>(B * ld_z), rng);
    auto b = test::random_f32(static_cast<std::size_t>(B * ld_ba), rng);
    auto a = test::random_f32(static_cast<std::size_t>(B * ld_ba), rng);
    if (step == 1) a[0] = 30.0f;  // softplus above its threshold: the linear branch
    d_qkv.upload(qkv.data(), qkv.size() * sizeof(float));
    d_z.upload(z.data(), z.size() * sizeof(float));
    d_b.upload(b.data(), b.size() * sizeof(float));
    d_a.upload(a.data(), a.size() * sizeof(float));
    d_pos.upload(pos.data(), pos.size() * sizeof(int64_t));
    test::poison(d_out);

    cuda::DeltaNetDecodeArgs args = d_layer.args(L);
    args.qkv = d_qkv.as<float>();
    args.ld_qkv = ld_qkv;
    args.z = d_z.as<float>();
    args.ld_z = ld_z;
    args.b = d_b.as<float>();
    args.a = d_a.as<float>();
    args.ld_ba = ld_ba;
    args.conv_state = d_ring.as<float>();
    args.conv_slot_stride = conv_slot;
    args.rec_state = d_state.as<float>();
    args.rec_slot_stride = rec_slot;
    args.slots = d_slots.as<int32_t>();
    args.positions = d_pos.as<int64_t>();
    args.out = d_out.as<__nv_bfloat16>();
    args.ld_out = ld_out;
    args.B = B;
    cuda::deltanet_decode(args, nullptr);
    QWENRT_CUDA_CHECK(cudaDeviceSynchronize());

    const auto out = test::to_host<uint16_t>(d_out, static_cast<std::size_t>(B * ld_out));
    for (int i = 0; i < B; ++i) {
      std::vector<float> ref_f;
      test::deltanet_reference_row(L, &qkv[i * ld_qkv], &z[i * ld_z], &b[i * ld_ba], &a[i * ld_ba], pos[i], &ring[slots[i] * conv_slot],
                                   &state[slots[i] * rec_slot], ref_f);
      // The output is bf16: rounding alone is up to 2^-9 relative per element (~1e-3 in L2). Each
      // element must be within one bf16 step of the f32 reference, plus a little for the f32 part.
      std::vector<float> got(static_cast<std::size_t>(L.value_dim));
      std::vector<double> ref(ref_f.begin(), ref_f.end());
      double rms = 0;
      for (double r : ref) rms += r * r;
      rms = std::sqrt(rms / static_cast<double>(ref.size()));
      int far = 0;
      for (int64_t j = 0; j < L.value_dim; ++j) {
        got[j] = bf16_to_f32(out[i * ld_out + j]);
        if (!(std::abs(got[j] - ref[j]) <= std::ldexp(std::abs(ref[j]), -8) + 1e-5 * rms)) ++far;
      }
      EXPECT_LT(relative_l2(got, ref), 4e-3) << "step " << step << " row " << i << " position " << pos[i];
      EXPECT_EQ(far, 0) << "elements beyond one bf16 step, step " << step << " row " << i;
      for (int64_t j = L.value_dim; j < ld_out; ++j) EXPECT_EQ(out[i * ld_out + j], 0xffff) << "padding of the output row was written, row " << i;
    }

    // The f32 caches: the ring is a copy of the inputs, so bitwise; the state within 1e-5.
    const auto got_ring = test::to_host<float>(d_ring, ring.size());
    EXPECT_EQ(0, std::memcmp(got_ring.data(), ring.data(), ring.size() * sizeof(float))) << "conv ring, step " << step;
    const auto got_state = test::to_host<float>(d_state, state.size());
    for (int s = 0; s < n_slots; ++s) {
      const auto first = static_cast<std::ptrdiff_t>(s * rec_slot);
      const bool used = std::find(slots.begin(), slots.end(), s) != slots.end();
      if (!used) {
        EXPECT_TRUE(std::equal(got_state.begin() + first, got_state.begin() + first + rec_slot, state0.begin() + first))
            << "unused slot " << s << " changed";
        continue;
      }
      const std::vector<float> g(got_state.begin() + first, got_state.begin() + first + int64_t{nv} * kD * kD);
      const std::vector<double> r(state.begin() + first, state.begin() + first + int64_t{nv} * kD * kD);
      EXPECT_LT(relative_l2(g, r), 1e-5) << "state of slot " << s << ", step " << step;
      EXPECT_TRUE(std::equal(got_state.begin() + first + int64_t{nv} * kD * kD, got_state.begin() + first + rec_slot,
                             state0.begin() + first + int64_t{nv} * kD * kD))
          << "padding after the state of slot " << s << " was written";
    }
  }
}

// Three sequences in non-adjacent slots, one starting fresh at position 0 (the conv reads zeros
// for positions < 0 until K−1), one at 1, one well past the ring.
TEST(DeltaNetDecode, MatchesCpuLayerOverStepsOneValueHeadPerKeyHead) {
  QWENRT_REQUIRE_GPU();
  run_steps(2, 2, 7, {5, 0, 3}, {0, 1, 9}, 6, 11);
}

TEST(DeltaNetDecode, MatchesCpuLayerOverStepsThreeValueHeadsPerKeyHead) {
  QWENRT_REQUIRE_GPU();
  run_steps(2, 6, 7, {5, 0, 3}, {0, 1, 9}, 6, 12);
}

// The Qwen3.5-27B head counts, a wider batch in shuffled slots.
TEST(DeltaNetDecode, MatchesCpuLayerAt27BShapes) {
  QWENRT_REQUIRE_GPU();
  run_steps(16, 48, 9, {8, 2, 6, 0, 4}, {100, 3, 0, 57, 2}, 2, 13);
}

TEST(DeltaNetDecode, RejectsBadArguments) {
  QWENRT_REQUIRE_GPU();
  cuda::DeviceBuffer d(1 << 20);
  cuda::DeltaNetDecodeArgs ok;
  ok.qkv = ok.z = ok.b = ok.a = ok.conv_w = ok.neg_exp_a = ok.dt_bias = ok.norm_w = d.as<float>();
  ok.conv_state = ok.rec_state = d.as<float>();
  ok.slots = d.as<int32_t>();
  ok.positions = d.as<int64_t>();
  ok.out = d.as<__nv_bfloat16>();
  ok.B = 1;
  ok.nk = 1;
  ok.nv = 2;
  ok.dk = ok.dv = kD;
  ok.K = kK;
  ok.ld_qkv = 4 * kD;
  ok.ld_z = ok.ld_out = 2 * kD;
  ok.ld_ba = 2;
  ok.conv_slot_stride = kK * 4 * kD;
  ok.rec_slot_stride = 2 * kD * kD;
  // Each case breaks one thing of `ok` (which is never launched: its slots are garbage).
  auto rejects = [&](auto&& change) {
    cuda::DeltaNetDecodeArgs bad = ok;
    change(bad);
    EXPECT_THROW(cuda::deltanet_decode(bad, nullptr), Error);
  };
  rejects([](auto& a) { a.dk = 64; });
  rejects([](auto& a) { a.dv = 256; });
  rejects([](auto& a) { a.K = 3; });
  rejects([](auto& a) { a.nk = 2, a.nv = 3; });
  rejects([](auto& a) { a.nk = 0; });
  rejects([](auto& a) { a.B = 0; });
  rejects([](auto& a) { a.ld_qkv = 4 * kD - 1; });
  rejects([](auto& a) { a.ld_out = kD; });
  rejects([](auto& a) { a.conv_slot_stride = 4 * kD; });
  rejects([](auto& a) { a.rec_slot_stride = 2 * kD * kD - 4; });
  rejects([](auto& a) { a.rec_slot_stride = 2 * kD * kD + 2; });
  rejects([](auto& a) { a.rec_state += 1; });
  rejects([](auto& a) { a.norm_w = nullptr; });
}

}  // namespace
}  // namespace qwenrt
