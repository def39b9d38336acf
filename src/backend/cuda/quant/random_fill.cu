// Synthetic packed weights made on the GPU (random_fill.h).
#include <algorithm>
#include <cstdint>

#include "backend/cuda/quant/random_fill.h"
#include "backend/cuda/runtime/cuda_check.h"
#include "core/error.h"

namespace qwenrt::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 1 << 16;

__device__ __forceinline__ uint64_t mix(uint64_t z) {  // splitmix64's finaliser
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

__global__ void random_bytes_kernel(uint64_t* dst, int64_t words, uint64_t seed, bool fp8) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; i < words; i += static_cast<int64_t>(gridDim.x) * kThreads) {
    uint64_t v = mix(seed * 0x9e3779b97f4a7c15ull + static_cast<uint64_t>(i) + 1);
    if (fp8) {
      for (int b = 0; b < 8; ++b)
        if (((v >> (8 * b)) & 0x7f) == 0x7f) v &= ~(uint64_t{1} << (8 * b));  // 0x7f → 0x7e, 0xff → 0xfe
    }
    dst[i] = v;
  }
}

template <typename T>
__global__ void fill_kernel(T* dst, int64_t n, T value) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; i < n; i += static_cast<int64_t>(gridDim.x) * kThreads) dst[i] = value;
}

unsigned blocks_for(int64_t n) { return static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>((n + kThreads - 1) / kThreads, kMaxBlocks))); }

}  // namespace

void fill_random_bytes(void* dst, std::size_t n, uint64_t seed, bool fp8, cudaStream_t stream) {
  if (n % 8 != 0 || reinterpret_cast<uintptr_t>(dst) % 8 != 0) fail("fill_random_bytes: ", n, " bytes must be whole aligned 8-byte words");
  const auto words = static_cast<int64_t>(n / 8);
  if (words == 0) return;
  random_bytes_kernel<<<blocks_for(words), kThreads, 0, stream>>>(static_cast<uint64_t*>(dst), words, seed, fp8);
  QWENRT_CUDA_CHECK_LAUNCH();
}

void fill_u16(void* dst, std::size_t n, uint16_t value, cudaStream_t stream) {
  if (n == 0) return;
  fill_kernel<uint16_t><<<blocks_for(static_cast<int64_t>(n)), kThreads, 0, stream>>>(static_cast<uint16_t*>(dst), static_cast<int64_t>(n), value);
  QWENRT_CUDA_CHECK_LAUNCH();
}

void fill_f32(float* dst, std::size_t n, float value, cudaStream_t stream) {
  if (n == 0) return;
  fill_kernel<float><<<blocks_for(static_cast<int64_t>(n)), kThreads, 0, stream>>>(dst, static_cast<int64_t>(n), value);
  QWENRT_CUDA_CHECK_LAUNCH();
}

}  // namespace qwenrt::cuda
