#pragma once
// The activations of a step on the GPU: one buffer per op-set Part (and per output of a product),
// each grown to the largest size asked of it and reused from step to step, so a decode step's
// addresses repeat and its captured graph can be replayed. Growth moves a buffer: it waits for the
// steps queued on the device and bumps the memory epoch.
#include <array>
#include <cstddef>
#include <vector>

#include "backend/cuda/gemm/skinny_gemm.h"
#include "backend/cuda/runtime/device_buffer.h"
#include "model/cuda/memory_epoch.h"
#include "model/ops.h"

namespace qwenrt {

// A device buffer that grows to the largest size asked of it (contents not kept).
class GrowableBuffer {
 public:
  template <typename T>
  T* get(std::size_t count) {
    const std::size_t bytes = std::max<std::size_t>(count * sizeof(T), 16);
    if (buf_.bytes() < bytes) {
      QWENRT_CUDA_CHECK(cudaDeviceSynchronize());  // a step still queued may use the old buffer
      buf_ = cuda::DeviceBuffer(bytes);
      bump_memory_epoch();
    }
    return buf_.as<T>();
  }

 private:
  cuda::DeviceBuffer buf_;
};

class ScratchArena {
 public:
  ScratchArena() : gemm_counters_(cuda::kSkinnyGemmCounters * sizeof(uint32_t)) {
    QWENRT_CUDA_CHECK(cudaMemset(gemm_counters_.get(), 0, gemm_counters_.bytes()));
  }

  // Output `index` of `part`.
  template <typename T>
  T* part(Part p, std::size_t count, int index = 0) {
    auto& list = parts_[static_cast<std::size_t>(p)];
    if (list.size() <= static_cast<std::size_t>(index)) list.resize(static_cast<std::size_t>(index) + 1);
    return list[static_cast<std::size_t>(index)].get<T>(count);
  }

  // Workspaces of the kernels, by what they are for.
  GrowableBuffer meta, gemm_partials, deltanet_window, attention_q, attention_splits, gate_up, argmax, matmul_input, moe_route, moe_work;
  GrowableBuffer dequant;  // prompt rows of a quantized product: a slice of its weight in bf16

  // The skinny GEMM's scratch: partial sums and its K-split tile counters (zeroed once here, left
  // zero by every launch).
  cuda::SkinnyGemmWorkspace gemm_workspace(std::size_t partial_bytes) {
    return {gemm_partials.get<std::byte>(partial_bytes), partial_bytes, gemm_counters_.as<uint32_t>()};
  }

  // Room for `rows` picks. Unlike the other buffers it keeps its contents when it grows: the step
  // queued next may read the last step's picks (StepSequence::from_previous).
  int32_t* picks_for(int64_t rows, cudaStream_t stream) {
    const std::size_t bytes = std::max<std::size_t>(static_cast<std::size_t>(rows) * sizeof(int32_t), 256);
    if (picks_.bytes() < bytes) {
      cuda::DeviceBuffer bigger(bytes);
      if (picks_.bytes() > 0) QWENRT_CUDA_CHECK(cudaMemcpyAsync(bigger.get(), picks_.get(), picks_.bytes(), cudaMemcpyDeviceToDevice, stream));
      QWENRT_CUDA_CHECK(cudaStreamSynchronize(stream));
      picks_ = std::move(bigger);
      bump_memory_epoch();
    }
    return picks_.as<int32_t>();
  }

 private:
  std::array<std::vector<GrowableBuffer>, static_cast<std::size_t>(Part::kCount)> parts_;
  cuda::DeviceBuffer gemm_counters_, picks_;
};

}  // namespace qwenrt
