#pragma once
// Ceilings and fills on the GPU that benchmarks and synthetic models need.
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace qwenrt::cuda {

// Device-to-device copy bandwidth of the current GPU, counting bytes read plus written (median of
// several copies of `bytes`).
double copy_bandwidth_GBps(std::size_t bytes = std::size_t{1} << 30);

// Bytes of device memory in use now (all processes), for peak-memory reports.
std::size_t device_memory_used();

// dst[i] = uniform noise in [−scale, scale] from (seed, i), rounded to bf16: random weights made
// where they are used (a synthetic 27B model never crosses the bus).
void fill_uniform_bf16(__nv_bfloat16* dst, std::size_t n, float scale, uint64_t seed, cudaStream_t stream);

}  // namespace qwenrt::cuda
