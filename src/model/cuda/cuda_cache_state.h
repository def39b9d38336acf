#pragma once
// The tensors of a ModelCache on one GPU: per slot all DeltaNet layers' conv rings and recurrent
// states (one contiguous range, zeroed when a sequence starts), per attention layer a K and a V pool
// of bf16 blocks that grows with the cache's block ids. The cache keeps the bookkeeping on the host.
// The layer counts are the cache's (the model's, or the MTP block's one attention layer).
#include <cuda_runtime_api.h>

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "backend/cuda/runtime/device_buffer.h"
#include "cache/model_cache.h"
#include "model/config.h"

namespace qwenrt {

struct CudaCacheState final : DeviceCacheState {
  uint64_t serial = 0;            // tells caches apart in the graph keys (addresses can be reused)
  cudaStream_t stream = nullptr;  // the executor's: the storage operations queue behind its steps
  int64_t gdn_layer_floats = 0, conv_floats = 0, slot_floats = 0;
  cuda::DeviceBuffer gdn;
  std::vector<cuda::DeviceBuffer> k_pool, v_pool;
  int64_t pool_blocks = 0, block_floats = 0;  // block_floats: bf16 elements of one block of one layer

  // The cache's state on this GPU, made on first use.
  static CudaCacheState& of(ModelCache& cache, const ModelConfig& config, cudaStream_t stream);
  // Grows every pool to hold `needed` blocks (contents kept).
  void reserve_blocks(int64_t needed, cudaStream_t stream);

  // The cache's storage operations (prefix cache, n > 1). A snapshot is the slot's whole range of
  // `gdn` (the conv rings keep their position-indexed rows: a state goes back to the same position).
  int64_t state_floats() const override { return slot_floats; }
  // Pinned host memory (a pool: each buffer pinned once, taken back when the prefix cache lets its
  // snapshot go): a 27B slot's 151 MB copy from pageable memory took ~220 ms, most of it faulting
  // in fresh pages, and held the scheduler 29 s of a 110 s H100 serving run.
  StateSnapshot new_snapshot() override;
  void copy_block(int from, int to) override;
  void save_state(int slot, float* dst) override;
  void load_state(int slot, const float* src) override;
  void copy_state(int from, int to) override;

  // Speculation: per armed slot, room for `rows` whole slot states (zeroed when made, so a restored
  // state's padding matches a slot's), where a step's DeltaNet layers copy the state after each row.
  float* kept_states(int slot, int rows);
  void restore_row_state(int slot, int row) override;

 private:
  struct PinnedPool;
  std::shared_ptr<PinnedPool> pinned_;  // shared with the snapshots' deleters (they may outlive this)
  struct Kept {
    cuda::DeviceBuffer states;
    int rows = 0;    // room
    int filled = 0;  // rows the last armed step kept
  };
  std::map<int, Kept> kept_;
};

}  // namespace qwenrt
