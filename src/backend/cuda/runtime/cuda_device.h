#pragma once
// The GPUs this process can see, and the check that one can run qwenrt.
#include <cstddef>
#include <string>

namespace qwenrt::cuda {

struct DeviceInfo {
  int index = 0;
  std::string name;
  int major = 0, minor = 0;  // compute capability
  int multiprocessors = 0;
  std::size_t total_bytes = 0, free_bytes = 0;
  std::size_t l2_bytes = 0;
  std::size_t shared_per_block_optin = 0;
};

// Devices visible (0 when there is no driver or no GPU; never throws).
int device_count();

// Properties and free memory of one device; Error if it does not exist.
DeviceInfo device_info(int index);

// Error unless device `index` exists and has compute capability >= 8.0; makes it current.
DeviceInfo require_supported_device(int index);

}  // namespace qwenrt::cuda
