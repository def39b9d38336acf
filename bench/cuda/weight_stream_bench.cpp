// The experimental ring-buffered weight stream (weight_stream_gemm) against the skinny GEMM the
// engine runs, on decode shapes, as a fraction of the copy bandwidth measured in the same run;
// each call streams its weight from device memory (copies rotated past the L2).
//   cuda_weight_stream_bench
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "backend/cuda/cuda_device.h"
#include "backend/cuda/device_buffer.h"
#include "backend/cuda/device_measure.h"
#include "backend/cuda/skinny_gemm.h"
#include "backend/cuda/weight_stream_gemm.h"
#include "core/half.h"
#include "cuda/cuda_bench_support.h"

using namespace qwenrt;

int main() try {
  const cuda::DeviceInfo dev = cuda::require_supported_device(0);
  const double copy = cuda::copy_bandwidth_GBps(std::size_t{2} << 30);
  std::printf("device %s, %d SMs; copy bandwidth %.0f GB/s\n", dev.name.c_str(), dev.multiprocessors, copy);
  struct Shape {
    const char* name;
    int64_t rows, k;
  };
  const std::vector<Shape> shapes = {{"27b ffn up (17408x5120)", 17408, 5120}, {"27b ffn down (5120x17408)", 5120, 17408},
                                     {"27b head (248320x5120)", 248320, 5120}, {"9b ffn up (12288x4096)", 12288, 4096},
                                     {"9b in_proj (12352x4096)", 12352, 4096}, {"9b down (4096x12288)", 4096, 12288},
                                     {"9b out_proj (4096x4096)", 4096, 4096},  {"0.8b qkv (6144x1024)", 6144, 1024}};
  std::mt19937 rng(1);
  std::normal_distribution<float> nd(0.0f, 0.05f);
  std::vector<uint16_t> xh(static_cast<std::size_t>(8 * 17408));
  for (auto& v : xh) v = f32_to_bf16(nd(rng));
  cuda::DeviceBuffer x(xh.size() * 2);
  x.upload(xh.data(), xh.size() * 2);
  // Ring variants: stages (3: two blocks per multiprocessor, else one) and tail split.
  const std::vector<cuda::WeightStreamConfig> configs = {{3, false}, {3, true}, {3, true, 1}, {6, true}};
  std::printf("\n%-28s %4s %11s", "weight", "rows", "skinny");
  for (const auto& c : configs)
    std::printf("  %dx%d%s", c.stages, c.blocks_per_sm ? c.blocks_per_sm : c.stages <= 3 ? 2 : 1, c.split_tail ? " split " : "       ");
  std::printf(" %10s\n", "max diff");
  for (const Shape& s : shapes) {
    const std::size_t wbytes = static_cast<std::size_t>(s.rows * s.k) * 2;
    // Copies of the weight cycled through, so L2 holds none of it (QWENRT_BENCH_WS_MB: how much
    // memory they span, 512 MB unless set; a decode step spans the whole model).
    const char* ws_mb = std::getenv("QWENRT_BENCH_WS_MB");
    const std::size_t span = (ws_mb ? std::strtoull(ws_mb, nullptr, 10) : 512) << 20;
    const int copies = static_cast<int>(std::max<std::size_t>(1, span / wbytes + 1));
    std::vector<uint16_t> wh(static_cast<std::size_t>(s.rows * s.k));
    for (auto& v : wh) v = f32_to_bf16(nd(rng));
    std::vector<cuda::DeviceBuffer> w;
    for (int i = 0; i < copies; ++i) {
      w.emplace_back(wbytes);
      w.back().upload(wh.data(), wbytes);
    }
    cuda::DeviceBuffer y0(static_cast<std::size_t>(8 * s.rows) * 4), y1(y0.bytes());
    const cuda::GemmSegment probe{w[0].as<__nv_bfloat16>(), s.rows, y0.as<float>(), s.rows, false};
    cuda::DeviceBuffer ws(std::max<std::size_t>(16, cuda::skinny_gemm_workspace_bytes(8, s.k, {&probe, 1})));
    cuda::DeviceBuffer counters(cuda::kSkinnyGemmCounters * 4);
    QWENRT_CUDA_CHECK(cudaMemset(counters.get(), 0, counters.bytes()));
    const cuda::SkinnyGemmWorkspace workspace{ws.get(), ws.bytes(), counters.as<uint32_t>()};
    cuda::DeviceBuffer ring_partial(cuda::kWeightStreamWorkspaceBytes);
    const cuda::SkinnyGemmWorkspace ring_ws{ring_partial.get(), ring_partial.bytes(), counters.as<uint32_t>()};
    const int reps = std::max(copies, static_cast<int>(std::min<int64_t>(200, (int64_t{8} << 30) / static_cast<int64_t>(wbytes))));
    for (int64_t n : {int64_t{1}, int64_t{8}}) {
      const double skinny = bench::graph_us_per_call(reps, [&](int i, cudaStream_t st) {
        const cuda::GemmSegment seg{w[i % copies].as<__nv_bfloat16>(), s.rows, y0.as<float>(), s.rows, false};
        cuda::skinny_gemm(x.as<__nv_bfloat16>(), n, s.k, s.k, {&seg, 1}, st, workspace);
      });
      std::vector<double> ring;
      for (const auto& c : configs)
        ring.push_back(bench::graph_us_per_call(reps, [&](int i, cudaStream_t st) {
          cuda::weight_stream_gemm(x.as<__nv_bfloat16>(), n, s.k, s.k, w[i % copies].as<__nv_bfloat16>(), s.rows, y1.as<float>(), s.rows, false,
                                   st, ring_ws, c);
        }));
      // Both against each other on the same weight (different summation orders: f32 rounding apart).
      const cuda::GemmSegment seg{w[0].as<__nv_bfloat16>(), s.rows, y0.as<float>(), s.rows, false};
      cuda::skinny_gemm(x.as<__nv_bfloat16>(), n, s.k, s.k, {&seg, 1}, nullptr, workspace);
      cuda::weight_stream_gemm(x.as<__nv_bfloat16>(), n, s.k, s.k, w[0].as<__nv_bfloat16>(), s.rows, y1.as<float>(), s.rows, false, nullptr, ring_ws);
      QWENRT_CUDA_CHECK(cudaDeviceSynchronize());
      std::vector<float> a(static_cast<std::size_t>(n * s.rows)), b(a.size());
      y0.download(a.data(), a.size() * 4);
      y1.download(b.data(), b.size() * 4);
      double diff = 0, scale = 0;
      for (std::size_t i = 0; i < a.size(); ++i) {
        diff = std::max(diff, static_cast<double>(std::abs(a[i] - b[i])));
        scale = std::max(scale, static_cast<double>(std::abs(a[i])));
      }
      auto pct = [&](double us) { return 100.0 * static_cast<double>(wbytes) / (us * 1e-6) / 1e9 / copy; };
      std::printf("%-28s %4lld %6.1f %3.0f%%", s.name, static_cast<long long>(n), skinny, pct(skinny));
      for (double us : ring) std::printf(" %6.1f %3.0f%%", us, pct(us));
      std::printf(" %10.2e\n", diff / std::max(scale, 1e-30));
    }
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "cuda_weight_stream_bench: %s\n", e.what());
  return 1;
}
