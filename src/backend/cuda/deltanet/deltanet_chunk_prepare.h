#pragma once
// Launchers of the chunked DeltaNet window's `prepare` and `ring` kernels (deltanet_chunk_prepare.cu),
// internal to deltanet_prefill: `prepare` reads the conv rings, `ring` then writes them.
#include <cuda_runtime_api.h>

#include <cstddef>

#include "backend/cuda/deltanet/deltanet_decode.h"

namespace qwenrt::cuda::deltanet_chunks {

struct Work;  // the window's workspace (deltanet_chunks.cuh)

void launch_prepare(const DeltaNetDecodeArgs& p, const Work& work, int chunks, cudaStream_t stream);
void launch_ring(const DeltaNetDecodeArgs& p, const Work& work, int spans, cudaStream_t stream);
// `prepare`'s shared memory per block.
std::size_t prepare_shared_bytes();

}  // namespace qwenrt::cuda::deltanet_chunks
