// Device selection and information (cuda_device.h), and whether launches are chained on this device
// (chained_launch.h).
#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "backend/cuda/runtime/chained_launch.h"
#include "backend/cuda/runtime/cuda_check.h"
#include "backend/cuda/runtime/cuda_device.h"
#include "backend/cuda/runtime/runtime_options.h"

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
    fail("CUDA device ", index, " does not exist: ",
         n == 0 ? std::string("no CUDA GPU or driver is visible")
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

namespace qwenrt::cuda {

bool chained_launch_enabled() {
  // Per device: 0 unknown, 1 off, 2 on. Racing first calls store the same value.
  static std::atomic<int8_t> state[64] = {};
  const bool switched_off = !runtime_options().pdl;
  int device = 0;
  if (switched_off || cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= 64) return false;
  int8_t s = state[device].load(std::memory_order_relaxed);
  if (s == 0) {
    int major = 0;
    // Only Hopper runs the sm_90a code whose kernels wait with griddepcontrol; elsewhere the kernels
    // come from the compute_80 PTX, which has no waits, so they must not start early.
    s = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) == cudaSuccess && major == 9 ? 2 : 1;
    state[device].store(s, std::memory_order_relaxed);
  }
  return s == 2;
}

}  // namespace qwenrt::cuda
