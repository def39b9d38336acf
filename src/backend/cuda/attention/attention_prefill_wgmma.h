#pragma once
// Launcher of the prefill attention kernel on Hopper's warpgroup products (attention_prefill_wgmma.cu,
// sm_90a), internal to attention_prefill: used where wgmma_available() (wgmma_probe.h).
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace qwenrt::cuda {

namespace prefill {
struct Params;  // the launch's arguments (attention_prefill_tile.cuh)
}

void launch_attention_prefill_wgmma(const prefill::Params& p, int64_t blocks, cudaStream_t stream);
// Its shared memory per block.
std::size_t attention_prefill_wgmma_shared_bytes();

}  // namespace qwenrt::cuda
