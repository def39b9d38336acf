// Decode-shaped products over packed quantized weights on the GPU (backend/cuda/quant/
// skinny_quant_gemm): time per call and the packed bytes streamed (weights, scales, biases) as a
// fraction of the copy bandwidth measured in the same run, beside the bf16 skinny GEMM on the same
// shape. q4 and q8 run in the tensor-core tiles the uploader makes ("q4 g64", "q8 g64") and in rows
// ("q4 rows", "q8 rows": the warp-per-row kernel, for comparison).
//   cuda_skinny_quant_bench [--quick] [FORMAT]    (--quick: one activation row; FORMAT: one of
//                                                  the formats below, e.g. "q4 g64", alone)
// Weights are rotated among enough copies that the L2 never holds them, as in a decode step.
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "backend/cuda/diagnostics/device_measure.h"
#include "backend/cuda/gemm/skinny_gemm.h"
#include "backend/cuda/quant/affine_tiles.h"
#include "backend/cuda/quant/affine_tiling.h"
#include "backend/cuda/quant/random_fill.h"
#include "backend/cuda/quant/skinny_quant_gemm.h"
#include "backend/cuda/runtime/cuda_device.h"
#include "backend/cuda/runtime/device_buffer.h"
#include "core/half.h"
#include "cuda/cuda_bench_support.h"

using namespace qwenrt;

namespace {

struct Shape {
  const char* name;
  int64_t rows, k;
};

struct Format {
  const char* name;
  cuda::QuantKind kind;
  int bits;            // affine: 4 or 8 (the value range of the fields); 0: FP8
  bool tiled = false;  // affine: in tensor-core tiles (the uploader's choice), else in rows
};

// One packed copy: fields, scales and biases (or FP8 bytes and f32 tile scales) as the uploader lays
// them out for synthetic weights (g64 bf16 for affine, in tiles or rows; 128x128 for FP8).
struct Packed {
  cuda::DeviceBuffer data, scales, biases;
  cuda::QuantMatrix m;
};

Packed make(const Format& f, const Shape& s, uint64_t seed) {
  Packed p;
  cuda::QuantMatrix& m = p.m;
  m.kind = f.kind;
  m.rows = s.rows;
  m.cols = s.k;
  m.tiled = f.tiled;
  p.data = cuda::DeviceBuffer(static_cast<std::size_t>(f.tiled ? cuda::affine_tiles::field_bytes(s.rows, s.k, f.bits) : s.rows * m.row_bytes()));
  cuda::fill_random_bytes(p.data.get(), p.data.bytes(), seed, f.kind == cuda::QuantKind::Fp8, nullptr);
  if (f.kind == cuda::QuantKind::Fp8) {
    m.block_rows = m.block_cols = 128;
    m.scale_cols = (s.k + 127) / 128;
    const std::size_t tiles = static_cast<std::size_t>((s.rows + 127) / 128 * m.scale_cols);
    p.scales = cuda::DeviceBuffer(tiles * 4);
    cuda::fill_f32(p.scales.as<float>(), tiles, 0.05f / 448.0f, nullptr);
    m.scale_type = cuda::QuantScale::F32;
  } else {
    m.group_size = 64;
    m.scale_type = cuda::QuantScale::BF16;
    const uint16_t scale = f32_to_bf16(0.1f / static_cast<float>((1 << f.bits) - 1)), bias = f32_to_bf16(-0.05f);
    if (f.tiled) {
      p.scales = cuda::DeviceBuffer(static_cast<std::size_t>(cuda::affine_tiles::table_values(s.rows, s.k / 64)) * 2);
      cuda::fill_affine_tile_scales_bf16(p.scales.get(), s.rows, s.k / 64, scale, bias, nullptr);
    } else {
      const std::size_t groups = static_cast<std::size_t>(s.rows * (s.k / 64));
      p.scales = cuda::DeviceBuffer(groups * 2);
      p.biases = cuda::DeviceBuffer(groups * 2);
      cuda::fill_u16(p.scales.get(), groups, scale, nullptr);
      cuda::fill_u16(p.biases.get(), groups, bias, nullptr);
      m.biases = p.biases.get();
    }
  }
  m.data = p.data.get();
  m.scales = p.scales.get();
  return p;
}

}  // namespace

int main(int argc, char** argv) try {
  bool quick = false;
  const char* only = nullptr;  // one format's name, or every format
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) quick = true;
    else only = argv[i];
  }
  std::vector<Format> formats = {{"q4 g64", cuda::QuantKind::Affine4, 4, true},
                                 {"q4 rows", cuda::QuantKind::Affine4, 4, false},
                                 {"q8 g64", cuda::QuantKind::Affine8, 8, true},
                                 {"q8 rows", cuda::QuantKind::Affine8, 8, false},
                                 {"fp8 128", cuda::QuantKind::Fp8, 0}};
  if (only) {
    std::erase_if(formats, [&](const Format& f) { return only != std::string(f.name); });
    if (formats.empty()) throw std::runtime_error(std::string("no format \"") + only + "\" (q4 g64, q4 rows, q8 g64, q8 rows, fp8 128)");
  }
  const cuda::DeviceInfo dev = cuda::require_supported_device(0);
  const double copy = cuda::copy_bandwidth_GBps(std::size_t{2} << 30);
  std::printf("device %s, %d SMs; copy bandwidth %.0f GB/s (read + write)\n", dev.name.c_str(), dev.multiprocessors, copy);
  const std::vector<Shape> shapes = {
      {"27b ffn up (17408x5120)", 17408, 5120}, {"27b ffn down (5120x17408)", 5120, 17408}, {"27b head (248320x5120)", 248320, 5120},
      {"9b ffn up (12288x4096)", 12288, 4096},  {"0.8b ffn down (1024x3584)", 1024, 3584},
  };
  const std::vector<int64_t> batches = quick ? std::vector<int64_t>{1} : std::vector<int64_t>{1, 2, 4, 8};
  cuda::DeviceBuffer x(static_cast<std::size_t>(8 * 17408) * 2);
  cuda::fill_uniform_bf16(x.as<__nv_bfloat16>(), static_cast<std::size_t>(8 * 17408), 1.0f, 7, nullptr);
  std::printf("\n%-28s %-8s %4s %10s %8s %12s %8s\n", "weight", "format", "rows", "quant us", "of copy", "bf16 skinny", "of copy");
  for (const Shape& s : shapes) {
    // The bf16 skinny GEMM on the same shape, for comparison.
    const std::size_t bf16_bytes = static_cast<std::size_t>(s.rows * s.k) * 2;
    const int bf16_copies = static_cast<int>(std::max<std::size_t>(1, (std::size_t{512} << 20) / bf16_bytes + 1));
    std::vector<cuda::DeviceBuffer> wb;
    for (int i = 0; i < bf16_copies; ++i) {
      wb.emplace_back(bf16_bytes);
      cuda::fill_uniform_bf16(wb.back().as<__nv_bfloat16>(), bf16_bytes / 2, 0.05f, static_cast<uint64_t>(i + 1), nullptr);
    }
    cuda::DeviceBuffer y(static_cast<std::size_t>(8 * s.rows) * 4);
    const cuda::GemmSegment probe{wb[0].as<__nv_bfloat16>(), s.rows, y.as<float>(), s.rows, false};
    cuda::DeviceBuffer ws(std::max<std::size_t>(16, cuda::skinny_gemm_workspace_bytes(8, s.k, {&probe, 1})));
    cuda::DeviceBuffer counters(cuda::kSkinnyGemmCounters * 4);
    QWENRT_CUDA_CHECK(cudaMemset(counters.get(), 0, counters.bytes()));
    const cuda::SkinnyGemmWorkspace workspace{ws.get(), ws.bytes(), counters.as<uint32_t>()};
    std::vector<double> dense;
    for (int64_t n : batches)
      dense.push_back(bench::graph_us_per_call(std::max(bf16_copies, 20), [&](int i, cudaStream_t st) {
        const cuda::GemmSegment seg{wb[static_cast<std::size_t>(i % bf16_copies)].as<__nv_bfloat16>(), s.rows, y.as<float>(), s.rows, false};
        cuda::skinny_gemm(x.as<__nv_bfloat16>(), n, s.k, s.k, {&seg, 1}, st, workspace);
      }));
    for (const Format& f : formats) {
      std::vector<Packed> w;
      w.push_back(make(f, s, 1));
      const auto qbytes = static_cast<std::size_t>(cuda::quant_matrix_bytes(w[0].m));
      const int copies = static_cast<int>(std::max<std::size_t>(1, (std::size_t{512} << 20) / qbytes + 1));
      for (int i = 1; i < copies; ++i) w.push_back(make(f, s, static_cast<uint64_t>(i + 1)));
      QWENRT_CUDA_CHECK(cudaDeviceSynchronize());
      const int reps = std::max(copies, static_cast<int>(std::min<int64_t>(200, (int64_t{8} << 30) / static_cast<int64_t>(qbytes))));
      for (std::size_t b = 0; b < batches.size(); ++b) {
        const int64_t n = batches[b];
        const double ours = bench::graph_us_per_call(reps, [&](int i, cudaStream_t st) {
          const cuda::QuantSegment seg{w[static_cast<std::size_t>(i % copies)].m, y.as<float>(), s.rows, false};
          cuda::skinny_quant_gemm(x.as<__nv_bfloat16>(), n, s.k, s.k, {&seg, 1}, st);
        });
        const double io = static_cast<double>(n * s.k * 2 + n * s.rows * 4);
        std::printf("%-28s %-8s %4lld %10.1f %7.0f%% %12.1f %7.0f%%\n", s.name, f.name, static_cast<long long>(n), ours,
                    100.0 * (static_cast<double>(qbytes) + io) / (ours * 1e-6) / 1e9 / copy, dense[b],
                    100.0 * (static_cast<double>(bf16_bytes) + io) / (dense[b] * 1e-6) / 1e9 / copy);
      }
    }
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "cuda_skinny_quant_bench: %s\n", e.what());
  return 1;
}
