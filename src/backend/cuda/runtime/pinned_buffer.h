#pragma once
// Page-locked host memory owned by one object, grown on demand and reused: what a step uploads
// (row metadata) and downloads (logits, tokens) goes through it, so a copy is one DMA instead of
// the driver's staged copy of pageable memory, and enqueuing an upload does not block the host.
// It is mapped into the device's address space, so kernels can also read and write it directly.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <utility>

#include "backend/cuda/runtime/cuda_check.h"

namespace qwenrt::cuda {

class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  ~PinnedBuffer() {
    if (ptr_) cudaFreeHost(ptr_);
  }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;

  // At least `bytes`, keeping nothing of the old contents when it has to grow. The caller must
  // not grow it while a copy from or to it is still pending on a stream.
  template <typename T>
  T* get(std::size_t count) {
    const std::size_t bytes = count * sizeof(T);
    if (bytes > bytes_) {
      if (ptr_) cudaFreeHost(std::exchange(ptr_, nullptr));
      bytes_ = 0;
      const std::size_t grown = bytes < 4096 ? 4096 : bytes;
      // Mapped: kernels may read and write it in place (a step's metadata and picks, without a copy
      // in the stream between two steps).
      const cudaError_t err = cudaHostAlloc(&ptr_, grown, cudaHostAllocMapped);
      if (err != cudaSuccess) {
        cudaGetLastError();
        ptr_ = nullptr;
        fail("cannot lock ", grown >> 10, " KiB of host memory for GPU transfers (", cudaGetErrorString(err), ")");
      }
      bytes_ = grown;
    }
    return static_cast<T*>(ptr_);
  }
  // The address kernels use for it (the same as the host's where addressing is unified).
  template <typename T>
  T* device_view() const {
    void* d = nullptr;
    QWENRT_CUDA_CHECK(cudaHostGetDevicePointer(&d, ptr_, 0));
    return static_cast<T*>(d);
  }

 private:
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

}  // namespace qwenrt::cuda
