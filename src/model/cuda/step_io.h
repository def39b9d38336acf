#pragma once
// A step's host side on the GPU: its row metadata packed into mapped pinned memory (copied in by
// the step's first kernel, so a replayed graph needs no copy in the stream), and its picks written
// back to mapped pinned memory by the argmax. Two entries alternate, so a step can be queued while
// the one before still runs.
#include <cuda_runtime_api.h>

#include <array>
#include <cstdint>
#include <vector>

#include "backend/cuda/ptx/non_finite_probe.h"
#include "backend/cuda/runtime/pinned_buffer.h"
#include "cache/model_cache.h"
#include "model/cuda/scratch_arena.h"
#include "model/step.h"

namespace qwenrt {

// Rows up to which decode steps replay captured graphs and products stream the weights (skinny
// GEMM) rather than go through cuBLAS.
constexpr int64_t kDecodeRows = 8;

struct StepIo {
  cuda::PinnedBuffer meta_host, picks_host;  // mapped: the step's kernels read and write them (picks, then row healths)
  cudaEvent_t done = nullptr;                // the step is done with them (its picks are there)
  int64_t rows = 0;                          // picked rows
  RowLayout layout;                          // its rows, for the error of a step that went non-finite
  bool busy = false;                         // enqueued and not yet waited for
};

// The device view of a step's rows, read by its kernels.
struct StepRows {
  const int32_t *tokens, *from, *pos32, *row_slot, *row_seq, *span_first, *logit_rows, *block_tables;
  const int64_t* pos64;
  // Committed steps: the DeltaNet recurrence's launches, row j of every sequence that has one, for
  // j = 0, 1, ... back to back (committed_launch_rows gives each launch's share); else null.
  const int32_t* committed_rows;
  // Per row, where the DeltaNet layers copy the slot's state after it (0: not kept); see
  // cuda::DeltaNetDecodeArgs::keep. Null when no row is kept.
  const unsigned long long* keep;
  int32_t* picks;  // the step's argmax per wanted row, where the next step's embedding may look
  // The packed metadata in pinned memory, where the step's first kernel copies it from, and to.
  const std::byte* meta_src;
  std::byte* meta_dst;
  std::size_t meta_bytes;
  int32_t* picks_mirror;  // mapped pinned memory the argmax writes too (argmax steps), else null
  // The step's health word (non_finite_probe.h), reset with the metadata by the first kernel, and
  // (argmax steps) each wanted row's health beside the picks in mapped pinned memory.
  unsigned long long* health;
  unsigned long long* health_mirror;
};

// Where an argmax step's row healths sit in StepIo::picks_host, after its `rows` picks.
inline std::size_t health_offset(int64_t rows) { return (static_cast<std::size_t>(rows) * sizeof(int32_t) + 7) / 8 * 8; }

// What a step's kernels and its graph key depend on beyond its row count.
struct StepShape {
  int64_t block_size = 64;
  int64_t max_len = 1;         // the longest sequence after the step (a power of two for graphs)
  int max_blocks_per_seq = 1;  // the block tables' stride
  bool graphable = false;      // a decode or committed step replayed from a captured graph
  // What else a captured graph bakes: whether rows keep their DeltaNet state and, for committed
  // steps, the rows per sequence and whether every row's logits are wanted (0: a plain decode step).
  uint64_t pattern = 0;
};

// A committed step's DeltaNet launches: how many rows launch j takes (the sequences with more than
// j rows), j = 0, 1, ...
std::vector<int> committed_launch_rows(const RowLayout& layout);

// Fills `shape` and packs the step's metadata into `io` (every entry of `entries` grown alike: a
// growth moves what graphs bake, one new memory epoch for both) and returns the device view.
// `keep`: per row, the address its kept DeltaNet state goes to (0: none), or empty when no row is
// kept. Committed steps give each row its own block table row (they run the decode kernels).
StepRows pack_step(const Step& step, const RowLayout& layout, const ModelCache& cache, bool graphs, bool argmax, StepShape& shape,
                   const std::vector<unsigned long long>& keep, std::array<StepIo, 2>& entries, StepIo& io, ScratchArena& scratch,
                   cudaStream_t stream);

}  // namespace qwenrt
