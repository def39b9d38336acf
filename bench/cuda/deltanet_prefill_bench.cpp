// Speed of the chunked Gated DeltaNet window (backend/cuda/deltanet/deltanet_prefill.h) on one prompt of
// 512, 8k and 32k rows at the head counts of the released models: cuda_deltanet_prefill_bench.
//
// The ceiling measured in the same run is the copy bandwidth, against the bytes the layer must move
// at least (f32 projections in, bf16 output out: the intermediates are extra traffic); the rate of
// the chunked form's products (bf16 tensor cores, f32 accumulation) is printed beside it.
// The peer figure is FLA's Triton kernel at Qwen3.5-27B shapes on this H200: 1.13 ms per layer at
// 8k rows, 3.4 ms at 32k (../shared/reference/peer-engines.md). Time per call: median of samples.
#include <algorithm>
#include <cstdio>
#include <vector>

#include "backend/cuda/deltanet/deltanet_prefill.h"
#include "backend/cuda/diagnostics/device_measure.h"
#include "backend/cuda/runtime/cuda_check.h"
#include "backend/cuda/runtime/cuda_device.h"
#include "backend/cuda/runtime/device_buffer.h"
#include "cuda/cuda_bench_support.h"

using namespace qwenrt;
using bench::median_ms;

namespace {

constexpr int kD = cuda::kDeltaNetDecodeHeadDim, kK = cuda::kDeltaNetDecodeConvKernel, kC = cuda::kDeltaNetChunk;

struct Case {
  const char* model;
  int nk, nv, T;
  double fla_ms;  // FLA's time at these shapes where measured, else 0
};

struct Result {
  Case c;
  double ms, floor_ms, tflops;
};

// Products of the chunked form per chunk and value head (multiply-adds × 2): K Kᵀ (64·64·128),
// W and U (2·64·64·128, half of it triangular), Δ (64·128·128), the state update (128·128·64),
// Q Kᵀ, Q S₀ and P Δ (64·64·128 + 64·128·128 + 64·64·128).
double chunk_flops() {
  const double c = kC, d = kD;
  return 2.0 * (c * c * d + c * c * d + c * d * d + d * d * c + c * c * d + c * d * d + c * c * d / 2);
}

Result run(const Case& c, double copy_GBps, cudaStream_t stream) {
  const int64_t key_dim = int64_t{c.nk} * kD, value_dim = int64_t{c.nv} * kD, conv_dim = 2 * key_dim + value_dim;
  auto filled = [](std::size_t floats, int byte) {
    cuda::DeviceBuffer d(floats * sizeof(float));
    QWENRT_CUDA_CHECK(cudaMemset(d.get(), byte, d.bytes()));
    return d;
  };
  // 0x3c bytes are the float 0.0115, 0xbc bytes −0.0115 (a decay gate of −0.0115 · softplus).
  auto qkv = filled(static_cast<std::size_t>(c.T * conv_dim), 0x3c), z = filled(static_cast<std::size_t>(c.T * value_dim), 0x3c);
  auto ba = filled(static_cast<std::size_t>(c.T * 2 * c.nv), 0x3c);
  auto conv_w = filled(static_cast<std::size_t>(conv_dim * kK), 0x3c), dt_bias = filled(static_cast<std::size_t>(c.nv), 0x3c);
  auto norm_w = filled(kD, 0x3c), neg_exp_a = filled(static_cast<std::size_t>(c.nv), 0xbc);
  auto conv_state = filled(static_cast<std::size_t>(kK * conv_dim), 0);
  auto rec_state = filled(static_cast<std::size_t>(value_dim * kD), 0);
  cuda::DeviceBuffer out(static_cast<std::size_t>(c.T * value_dim) * 2);
  const std::vector<cuda::DeltaNetSpan> spans = {{0, c.T, 0, 0}};
  const std::size_t ws_bytes = cuda::deltanet_prefill_workspace_bytes(spans, c.nk, c.nv);
  cuda::DeviceBuffer ws(ws_bytes);
  const cuda::DeltaNetWindow window = cuda::plan_deltanet_window(spans, c.nk, c.nv, ws.get(), ws_bytes, stream);

  cuda::DeltaNetDecodeArgs args;
  args.qkv = qkv.as<float>();
  args.ld_qkv = conv_dim;
  args.z = z.as<float>();
  args.ld_z = value_dim;
  args.b = ba.as<float>();
  args.a = ba.as<float>() + c.nv;
  args.ld_ba = 2 * c.nv;
  args.conv_w = conv_w.as<float>();
  args.neg_exp_a = neg_exp_a.as<float>();
  args.dt_bias = dt_bias.as<float>();
  args.norm_w = norm_w.as<float>();
  args.conv_state = conv_state.as<float>();
  args.conv_slot_stride = kK * conv_dim;
  args.rec_state = rec_state.as<float>();
  args.rec_slot_stride = value_dim * kD;
  args.out = out.as<__nv_bfloat16>();
  args.ld_out = value_dim;
  args.nk = c.nk;
  args.nv = c.nv;
  args.dk = args.dv = kD;
  args.K = kK;
  auto call = [&] { cuda::deltanet_prefill(args, window, stream); };
  call();
  const double ms = median_ms(call, c.T > 8192 ? 5 : 11, 1, stream);
  const double bytes = static_cast<double>(c.T) * (conv_dim * 4.0 + value_dim * 4.0 + 2.0 * c.nv * 4.0 + value_dim * 2.0);
  const double chunks = (c.T + kC - 1) / kC;
  return {c, ms, bytes / (copy_GBps * 1e9) * 1e3, chunks * c.nv * chunk_flops() / (ms * 1e-3) / 1e12};
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::string(argv[1]) == "--quick";
  try {
    const auto dev = cuda::require_supported_device(0);
    cudaStream_t stream;
    QWENRT_CUDA_CHECK(cudaStreamCreate(&stream));
    const double copy = cuda::copy_bandwidth_GBps();
    std::printf("%s, %d SMs; copy %.0f GB/s (read + write)\n", dev.name.c_str(), dev.multiprocessors, copy);
    std::vector<Case> cases = {
        {"27B", 16, 48, 512, 0}, {"27B", 16, 48, 8192, 1.13}, {"27B", 16, 48, 32768, 3.4}, {"9B", 16, 32, 8192, 0}, {"0.8B", 16, 16, 8192, 0}};
    if (quick) cases = {{"27B", 16, 48, 8192, 1.13}};
    std::vector<Result> results;
    for (const Case& c : cases) {
      const Result r = run(c, copy, stream);
      results.push_back(r);
      std::printf("%-4s nk %2d nv %2d T %5d: %8.3f ms/layer (%.2f of the copy floor %.3f ms), %6.1f TFLOP/s in the chunk products\n", c.model, c.nk,
                  c.nv, c.T, r.ms, r.floor_ms / r.ms, r.floor_ms, r.tflops);
    }
    std::printf("\n| model | rows | ms/layer | copy floor ms | of floor | chunk TFLOP/s | FLA ms | vs FLA |\n|---|---|---|---|---|---|---|---|\n");
    for (const Result& r : results) {
      if (r.c.fla_ms > 0)
        std::printf("| %s | %d | %.3f | %.3f | %.2f | %.1f | %.2f | %.2fx |\n", r.c.model, r.c.T, r.ms, r.floor_ms, r.floor_ms / r.ms, r.tflops,
                    r.c.fla_ms, r.c.fla_ms / r.ms);
      else std::printf("| %s | %d | %.3f | %.3f | %.2f | %.1f | - | - |\n", r.c.model, r.c.T, r.ms, r.floor_ms, r.floor_ms / r.ms, r.tflops);
    }
    QWENRT_CUDA_CHECK(cudaStreamDestroy(stream));
  } catch (const Error& e) {
    std::fprintf(stderr, "cuda_deltanet_prefill_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
