#include "backend/cuda/cuda_device.h"

#include <cuda_runtime.h>

#include "backend/cuda/cuda_check.h"

namespace qwenrt::cuda {

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no driver" error
    return 0;
  }
  return n;
}

DeviceInfo device_info(int index) {
  const int n = device_count();
  if (index < 0 || index >= n)
    fail("CUDA device ", index, " does not exist: ", n == 0 ? std::string("no CUDA GPU or driver is visible")
                                                             : std::to_string(n) + " device(s) are visible (cuda:0..cuda:" + std::to_string(n - 1) + ")");
  cudaDeviceProp p{};
  QWENRT_CUDA_CHECK(cudaGetDeviceProperties(&p, index));
  DeviceInfo info;
  info.index = index;
  info.name = p.name;
  info.major = p.major;
  info.minor = p.minor;
  info.multiprocessors = p.multiProcessorCount;
  info.total_bytes = p.totalGlobalMem;
  info.l2_bytes = static_cast<std::size_t>(p.l2CacheSize);
  info.shared_per_block_optin = p.sharedMemPerBlockOptin;
  int current = 0;
  QWENRT_CUDA_CHECK(cudaGetDevice(&current));
  QWENRT_CUDA_CHECK(cudaSetDevice(index));
  std::size_t free_bytes = 0, total = 0;
  QWENRT_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total));
  info.free_bytes = free_bytes;
  QWENRT_CUDA_CHECK(cudaSetDevice(current));
  return info;
}

DeviceInfo require_supported_device(int index) {
  DeviceInfo info = device_info(index);
  if (info.major < 8)
    fail("CUDA device ", index, " (", info.name, ") has compute capability ", info.major, ".", info.minor,
         "; qwenrt's CUDA backend needs 8.0 or newer (Ampere, Ada, Hopper); use --device cpu");
  QWENRT_CUDA_CHECK(cudaSetDevice(index));
  return info;
}

}  // namespace qwenrt::cuda
