#pragma once
// A device copy done by a kernel: a step's metadata read from mapped host memory inside a graph.
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstddef>

namespace qwenrt::cuda {

// dst[0, bytes) = src[0, bytes) by a kernel, both 16-byte aligned and bytes a multiple of 16: a
// step's metadata read from mapped host memory inside a captured graph, where a copy in the stream
// would add a copy engine's round trip between two steps.
void copy_in_kernel(const void* src, void* dst, std::size_t bytes, cudaStream_t stream);

}  // namespace qwenrt::cuda
