#pragma once
// Launcher of the chunked DeltaNet window's `output` kernel (deltanet_chunk_output.cu), internal to
// deltanet_prefill: it finishes each chunk's rows as `state` hands the chunk's state over.
#include <cuda_runtime_api.h>

#include <cstddef>

#include "backend/cuda/deltanet/deltanet_decode.h"

namespace qwenrt::cuda::deltanet_chunks {

struct Work;  // the window's workspace (deltanet_chunks.cuh)

void launch_output(const DeltaNetDecodeArgs& p, const Work& work, int chunks, cudaStream_t stream);
// Its shared memory per block.
std::size_t output_shared_bytes();

}  // namespace qwenrt::cuda::deltanet_chunks
