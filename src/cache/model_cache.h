#pragma once
// Per-sequence state of every layer, owned by the cache.
//
// Attention layers: post-norm, post-RoPE K and V in f32, in paged blocks of `block_size` tokens
// (one block id covers all attention layers; a sequence owns a table of block ids). Blocks are
// reference-counted: a sequence may start from blocks another holder (the prefix cache, a sibling
// choice) keeps, and a block returns to the pool when its last holder lets go. A shared block is
// never written: a sequence continues into blocks of its own (extend copies a partly filled shared
// last block first).
// Gated-DeltaNet layers: the conv state (last K−1 pre-conv rows) and the f32 recurrent state
// [nv, dk, dv], one slot per sequence.
//
// Pools: `max_sequences` state slots, and either a fixed pool of `max_blocks` KV blocks sized at
// start-up (the server: extend() past it is an error, so the caller admits against free_blocks())
// or, with max_blocks = 0, blocks made as they are needed (run, bench, tests).
//
// On a GPU the cache keeps only the bookkeeping here (slots, lengths, block tables) and the device
// executor keeps the tensors in a DeviceCacheState it attaches to the cache.
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

namespace qwenrt {

// The sizes of one sequence's state, as the model describes them (the cache knows no model).
struct CacheShape {
  int64_t attention_layers = 0, deltanet_layers = 0;
  int64_t kv_row = 0;            // floats of one token's K (or V) in one attention layer: Nkv·Dh
  int64_t conv_floats = 0;       // DeltaNet conv state per layer per slot: (K−1)·conv_dim
  int64_t recurrent_floats = 0;  // DeltaNet recurrent state per layer per slot: nv·dk·dv
};

// Host memory for one slot's DeltaNet state (ModelCache::snapshot_floats() floats), as the prefix
// cache keeps it; not zeroed (save_state writes all of it).
using StateSnapshot = std::unique_ptr<float[], std::function<void(float*)>>;
StateSnapshot plain_snapshot(int64_t floats);

// What a device executor keeps alongside the cache (its KV pools and state slots), and the storage
// operations the cache asks of it when the tensors live there. Each runs in order with the steps
// the executor has queued; save_state returns once dst holds the state.
class DeviceCacheState {
 public:
  virtual ~DeviceCacheState() = default;
  // Floats of one slot's DeltaNet state in the device's own layout (what save_state writes).
  virtual int64_t state_floats() const = 0;
  // Memory for a snapshot that save_state and load_state copy fastest (a GPU's pinned memory).
  virtual StateSnapshot new_snapshot() { return plain_snapshot(state_floats()); }
  virtual void copy_block(int from, int to) = 0;  // every attention layer's K and V rows
  virtual void save_state(int slot, float* dst) = 0;
  virtual void load_state(int slot, const float* src) = 0;
  virtual void copy_state(int from, int to) = 0;
  // Speculation: the slot's DeltaNet state becomes the one its last armed step kept after its row
  // `row` (ModelCache::keep_row_states); Error when that step kept none.
  virtual void restore_row_state(int slot, int row) = 0;
};

class ModelCache {
 public:
  // host_storage = false: bookkeeping only (the tensors live on a device). max_blocks = 0: KV
  // blocks are made on demand, without a bound.
  ModelCache(const CacheShape& shape, int max_sequences, int64_t block_size = 64, bool host_storage = true, int64_t max_blocks = 0);

  int acquire();                   // a fresh, empty sequence slot; Error when all are in use
  void release(int slot);          // frees the slot and lets go of its KV blocks
  int64_t length(int slot) const;  // tokens the slot holds
  int max_sequences() const { return static_cast<int>(slots_.size()); }
  int free_slots() const;

  // Makes room for `new_length` tokens and records it as the slot's length. Called once per step
  // per sequence before the layers run. Error when a bounded pool has no free block.
  void extend(int slot, int64_t new_length);

  // Attention: `attn_layer` counts attention layers only. Rows are [Nkv, Dh].
  float* key(int attn_layer, int slot, int64_t position);
  float* value(int attn_layer, int slot, int64_t position);

  // DeltaNet: `gdn_layer` counts linear-attention layers only.
  float* conv_state(int gdn_layer, int slot);       // [K−1, conv_dim]
  float* recurrent_state(int gdn_layer, int slot);  // [nv, dk, dv]

  // Sharing (the prefix cache and n > 1 choices; on a device through its DeviceCacheState).
  // The blocks holding the slot's first `tokens` tokens, each with one more reference for the caller.
  std::vector<int> share_blocks(int slot, int64_t tokens);
  void retain_blocks(const std::vector<int>& blocks);   // one more reference each
  void release_blocks(const std::vector<int>& blocks);  // one reference less each
  // A fresh slot (length 0) starts as `tokens` tokens held in `blocks` (shared; a partly filled last
  // block is copied by extend() before the slot writes into it).
  void attach_prefix(int slot, const std::vector<int>& blocks, int64_t tokens);
  // The blocks extend(slot, new_length) would take from the pool (a copied shared block included).
  int64_t blocks_needed(int slot, int64_t new_length) const;
  // Every DeltaNet layer's conv and recurrent state of the slot, state_floats() floats.
  int64_t state_floats() const { return (conv_floats_ + recurrent_floats_) * n_gdn_; }
  // What save_state writes: state_floats() on the host, the device's layout on a device (Error
  // before the device holds anything: no step has run yet).
  int64_t snapshot_floats() const;
  StateSnapshot new_snapshot() const;  // snapshot_floats() floats where save_state copies fastest
  void save_state(int slot, float* dst) const;
  void load_state(int slot, const float* src);
  // `to` (fresh) becomes a copy of `from`: the same tokens (blocks shared) and state.
  void fork(int from, int to);
  bool host_storage() const { return host_storage_; }
  // Speculative verification. keep_row_states arms the slot for its next step of up to `rows`
  // rows: a committed (or decode) step then keeps, per row, every DeltaNet layer's conv and
  // recurrent state as they stand after that row, so that truncate can end the slot after any of
  // those rows. The pointers are null while the slot is not armed or `position` is not a row of
  // the armed step (and always on a device, which keeps them itself). Memory: rows ×
  // state_bytes_per_sequence().
  void keep_row_states(int slot, int rows);
  float* row_conv_state(int gdn_layer, int slot, int64_t position);       // [K−1, conv_dim] after `position`
  float* row_recurrent_state(int gdn_layer, int slot, int64_t position);  // [nv, dk, dv] after `position`
  // Cuts the slot back to `length` tokens (<= its length): KV rows past it are forgotten (whole
  // blocks past it freed), and the DeltaNet state is the one kept after row length − 1 of the armed
  // step (Error when the model has DeltaNet layers and that row was not kept). Disarms the slot.
  // What remains equals, bit for bit, a slot that was only ever fed those `length` tokens the same way.
  void truncate(int slot, int64_t length);
  void drop_row_states(int slot);  // disarms the slot (its buffers stay for the next armed step)
  // The armed step's rows (0 when the slot is not armed) and its first position: what a device
  // executor keeps states for.
  int kept_rows(int slot) const { return slots_.at(static_cast<std::size_t>(slot)).row_count; }
  int64_t kept_rows_start(int slot) const { return slots_.at(static_cast<std::size_t>(slot)).row_start; }

  int64_t attention_layers() const { return n_attn_; }
  int64_t deltanet_layers() const { return n_gdn_; }

  std::size_t state_bytes_per_sequence() const;  // DeltaNet state of one sequence, all layers
  std::size_t kv_bytes_per_token() const;
  std::size_t kv_bytes_per_block() const { return kv_bytes_per_token() * static_cast<std::size_t>(block_size_); }

  int64_t block_size() const { return block_size_; }
  const std::vector<int>& block_table(int slot) const { return slots_.at(static_cast<std::size_t>(slot)).blocks; }
  int block_count() const { return block_count_; }    // block ids handed out so far (all < this)
  int64_t max_blocks() const { return max_blocks_; }  // 0: unbounded
  int64_t blocks_in_use() const { return blocks_in_use_; }
  int64_t free_blocks() const { return max_blocks_ - blocks_in_use_; }  // bounded pools
  int block_refs(int block) const { return refs_.at(static_cast<std::size_t>(block)); }

  DeviceCacheState* device_state() const { return device_state_.get(); }
  void set_device_state(std::unique_ptr<DeviceCacheState> state) { device_state_ = std::move(state); }

 private:
  struct Slot {
    bool in_use = false;
    int64_t length = 0;
    std::vector<int> blocks;
    // Armed for speculation: the step starting at row_start keeps up to row_count rows' states,
    // [row][layer][floats].
    int64_t row_start = -1;
    int row_count = 0;
    std::vector<float> row_conv, row_recurrent;
  };
  float* kv(int attn_layer, int slot, int64_t position, int which);
  float* block_data(int block);
  float* slot_state(int slot);
  int allocate_block();
  void require_host(const char* what) const;
  DeviceCacheState& device(const char* what) const;
  Slot& used_slot(int slot);

  int64_t block_size_, n_attn_, n_gdn_, kv_row_;  // kv_row_ = Nkv·Dh floats
  int64_t conv_floats_, recurrent_floats_;        // per layer per slot
  std::vector<Slot> slots_;
  bool host_storage_;
  int64_t max_blocks_;
  int block_count_ = 0;
  int64_t blocks_in_use_ = 0;
  std::vector<int> refs_;                         // per block id
  std::unique_ptr<float[]> pool_;                 // bounded host pools: max_blocks blocks, touched as used
  std::vector<std::unique_ptr<float[]>> blocks_;  // unbounded host pools: one allocation per block
  std::unique_ptr<float[]> states_;               // host: every slot's DeltaNet state
  std::vector<int> free_blocks_;
  std::unique_ptr<DeviceCacheState> device_state_;
};

}  // namespace qwenrt
