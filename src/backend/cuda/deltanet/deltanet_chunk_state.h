#pragma once
// Launcher of the chunked DeltaNet window's `state` kernel (deltanet_chunk_state.cu), internal to
// deltanet_prefill: it carries S across chunks, on mma.sync or, where asked and available, on
// warpgroup products (deltanet_chunk_state_wgmma.h).
#include <cuda_runtime_api.h>

#include <cstddef>

#include "backend/cuda/deltanet/deltanet_decode.h"

namespace qwenrt::cuda::deltanet_chunks {

struct Work;  // the window's workspace (deltanet_chunks.cuh)

void launch_state(const DeltaNetDecodeArgs& p, const Work& work, int spans, cudaStream_t stream);
// Its shared memory per block for `nv` value heads.
std::size_t state_shared_bytes(int nv);

}  // namespace qwenrt::cuda::deltanet_chunks
