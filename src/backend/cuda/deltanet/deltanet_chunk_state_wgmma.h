#pragma once
// Launcher of the chunked DeltaNet window's `state` kernel on warpgroup products
// (deltanet_chunk_state_wgmma.cu), for blocks of 64 state columns on sm_90a; launch_state
// (deltanet_chunk_state.h) picks it where it can.
#include <cuda_runtime_api.h>

#include <cstddef>

#include "backend/cuda/deltanet/deltanet_decode.h"

namespace qwenrt::cuda::deltanet_chunks {

struct Work;  // the window's workspace (deltanet_chunks.cuh)

void launch_state_wgmma(const DeltaNetDecodeArgs& p, const Work& work, int spans, cudaStream_t stream);
// Its shared memory per block.
std::size_t state_wgmma_shared_bytes();

}  // namespace qwenrt::cuda::deltanet_chunks
