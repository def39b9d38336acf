#pragma once
// Synthetic quantized weights made on the GPU (qwenrt bench --device cuda --synthetic SIZE --quant):
// random packed bytes and constant scales, so a 27B model never passes through host memory.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace qwenrt::cuda {

// n random bytes (n a multiple of 8, dst 8-byte aligned) from `seed`. With `fp8` the e4m3 NaN codes
// (0x7f, 0xff) are cleared to 0x7e / 0xfe, as the host's synthetic FP8 weights are.
void fill_random_bytes(void* dst, std::size_t n, uint64_t seed, bool fp8, cudaStream_t stream);

// n copies of a 16-bit pattern (bf16 scales and biases).
void fill_u16(void* dst, std::size_t n, uint16_t value, cudaStream_t stream);

// n copies of an f32 value.
void fill_f32(float* dst, std::size_t n, float value, cudaStream_t stream);

}  // namespace qwenrt::cuda
