// Speed of the fused Gated DeltaNet decode step (backend/cuda/deltanet/deltanet_decode.h) against the
// device-to-device copy bandwidth measured in the same run: cuda_deltanet_decode_bench.
//
// The kernel is bound by its f32 recurrent state (read once, written once: 64 KiB per value head
// per sequence each way), so "GB/s" counts those state bytes alone; the conv ring, inputs and
// outputs add about 1% at these shapes. Launches rotate among enough cache slots that the states
// touched exceed the L2 several times over, as they do in a real model between two steps of one
// layer. Time per call is the median over samples of back-to-back launches.
#include <algorithm>
#include <cstdio>
#include <vector>

#include "backend/cuda/deltanet/deltanet_decode.h"
#include "backend/cuda/diagnostics/device_measure.h"
#include "backend/cuda/runtime/cuda_check.h"
#include "backend/cuda/runtime/cuda_device.h"
#include "backend/cuda/runtime/device_buffer.h"
#include "cuda/cuda_bench_support.h"

using namespace qwenrt;
using bench::median_ms;

namespace {

constexpr int kD = cuda::kDeltaNetDecodeHeadDim, kK = cuda::kDeltaNetDecodeConvKernel;

struct Case {
  const char* model;
  int nk, nv, B;
};

struct Result {
  Case c;
  double us, state_bytes, gbps;
};

template <typename T>
cuda::DeviceBuffer upload(const std::vector<T>& v) {
  cuda::DeviceBuffer d(v.size() * sizeof(T));
  d.upload(v.data(), v.size() * sizeof(T));
  return d;
}

Result run(const Case& c, std::size_t l2_bytes, cudaStream_t stream) {
  const int64_t key_dim = int64_t{c.nk} * kD, value_dim = int64_t{c.nv} * kD, conv_dim = 2 * key_dim + value_dim;
  const int64_t rec_slot = value_dim * kD, conv_slot = kK * conv_dim;
  const double state_bytes = 2.0 * c.B * static_cast<double>(rec_slot) * sizeof(float);
  // Enough rotations that the states of one pass are at least 4 × L2.
  const int rotations = std::max<int>(2, static_cast<int>(4.0 * static_cast<double>(l2_bytes) / (state_bytes / 2) + 1));
  const int64_t slots = int64_t{rotations} * c.B;

  // 0x3c bytes are the float 0.0115: small finite inputs and states everywhere.
  auto filled = [](std::size_t floats) {
    cuda::DeviceBuffer d(floats * sizeof(float));
    QWENRT_CUDA_CHECK(cudaMemset(d.get(), 0x3c, d.bytes()));
    return d;
  };
  auto qkv = filled(static_cast<std::size_t>(c.B * conv_dim)), z = filled(static_cast<std::size_t>(c.B * value_dim));
  auto b = filled(static_cast<std::size_t>(c.B * c.nv)), a = filled(static_cast<std::size_t>(c.B * c.nv));
  auto conv_w = filled(static_cast<std::size_t>(conv_dim * kK)), dt_bias = filled(static_cast<std::size_t>(c.nv));
  auto norm_w = filled(kD);
  auto neg_exp_a = upload(std::vector<float>(static_cast<std::size_t>(c.nv), -1.0f));
  auto conv_state = filled(static_cast<std::size_t>(slots * conv_slot));
  auto rec_state = filled(static_cast<std::size_t>(slots * rec_slot));
  std::vector<int32_t> slot_ids(static_cast<std::size_t>(slots));
  for (int64_t i = 0; i < slots; ++i) slot_ids[i] = static_cast<int32_t>(i);
  auto d_slots = upload(slot_ids);
  auto positions = upload(std::vector<int64_t>(static_cast<std::size_t>(c.B), 1000));
  cuda::DeviceBuffer out(static_cast<std::size_t>(c.B * value_dim) * 2);

  cuda::DeltaNetDecodeArgs args;
  args.qkv = qkv.as<float>();
  args.ld_qkv = conv_dim;
  args.z = z.as<float>();
  args.ld_z = value_dim;
  args.b = b.as<float>();
  args.a = a.as<float>();
  args.ld_ba = c.nv;
  args.conv_w = conv_w.as<float>();
  args.neg_exp_a = neg_exp_a.as<float>();
  args.dt_bias = dt_bias.as<float>();
  args.norm_w = norm_w.as<float>();
  args.conv_state = conv_state.as<float>();
  args.conv_slot_stride = conv_slot;
  args.rec_state = rec_state.as<float>();
  args.rec_slot_stride = rec_slot;
  args.positions = positions.as<int64_t>();
  args.out = out.as<__nv_bfloat16>();
  args.ld_out = value_dim;
  args.B = c.B;
  args.nk = c.nk;
  args.nv = c.nv;
  args.dk = args.dv = kD;
  args.K = kK;

  int r = 0;
  auto call = [&] {
    args.slots = d_slots.as<int32_t>() + int64_t{r} * c.B;  // rotation r uses slots r·B .. r·B + B − 1
    r = (r + 1) % rotations;
    cuda::deltanet_decode(args, stream);
  };
  for (int i = 0; i < 2 * rotations; ++i) call();
  const double ms = median_ms(call, 51, std::max(10, rotations), stream);
  QWENRT_CUDA_CHECK(cudaStreamSynchronize(stream));
  return {c, ms * 1e3, state_bytes, state_bytes / (ms * 1e-3) / 1e9};
}

}  // namespace

int main() {
  try {
    const auto dev = cuda::require_supported_device(0);
    cudaStream_t stream;
    QWENRT_CUDA_CHECK(cudaStreamCreate(&stream));
    const double copy = cuda::copy_bandwidth_GBps();
    std::printf("%s, %d SMs, L2 %zu MiB; copy %.0f GB/s (read + write)\n", dev.name.c_str(), dev.multiprocessors, dev.l2_bytes >> 20, copy);
    std::vector<Result> results;
    for (Case c : {Case{"27B", 16, 48, 1}, Case{"27B", 16, 48, 8}, Case{"27B", 16, 48, 32}, Case{"27B", 16, 48, 64}, Case{"0.8B", 16, 16, 1}}) {
      const Result res = run(c, dev.l2_bytes, stream);
      results.push_back(res);
      std::printf("%-4s nk %2d nv %2d B %2d: %8.2f us/call, state %7.1f MB moved, %6.0f GB/s (%.2f of copy)\n", c.model, c.nk, c.nv, c.B, res.us,
                  res.state_bytes / 1e6, res.gbps, res.gbps / copy);
    }
    std::printf("\n| model | B | us/call | state MB | GB/s | of copy |\n|---|---|---|---|---|---|\n");
    for (const Result& res : results)
      std::printf("| %s | %d | %.2f | %.1f | %.0f | %.2f |\n", res.c.model, res.c.B, res.us, res.state_bytes / 1e6, res.gbps, res.gbps / copy);
    QWENRT_CUDA_CHECK(cudaStreamDestroy(stream));
  } catch (const Error& e) {
    std::fprintf(stderr, "cuda_deltanet_decode_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
