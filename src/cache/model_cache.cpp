#include "cache/model_cache.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"

namespace qwenrt {

ModelCache::ModelCache(const CacheShape& shape, int max_sequences, int64_t block_size, bool host_storage, int64_t max_blocks)
    : block_size_(block_size),
      n_attn_(shape.attention_layers),
      n_gdn_(shape.deltanet_layers),
      kv_row_(shape.kv_row),
      conv_floats_(shape.conv_floats),
      recurrent_floats_(shape.recurrent_floats),
      slots_(static_cast<std::size_t>(std::max(max_sequences, 0))),
      host_storage_(host_storage),
      max_blocks_(max_blocks) {
  if (max_sequences < 1) fail("cache needs at least one sequence slot");
  if (block_size < 1) fail("cache block size must be positive");
  if (max_blocks < 0 || max_blocks > INT32_MAX) fail("cache block pool size ", max_blocks, " is out of range");
  if (host_storage_) {
    // Left uninitialised: the pages become resident as sequences use them.
    if (max_blocks_ > 0 && n_attn_ > 0) pool_.reset(new float[static_cast<std::size_t>(max_blocks_ * n_attn_ * 2 * block_size_ * kv_row_)]);
    if (state_floats() > 0) states_.reset(new float[static_cast<std::size_t>(state_floats() * max_sequences)]);
  }
}

ModelCache::Slot& ModelCache::used_slot(int slot) {
  if (slot < 0 || slot >= max_sequences()) fail("sequence slot ", slot, " does not exist");
  Slot& s = slots_[static_cast<std::size_t>(slot)];
  if (!s.in_use) fail("sequence slot ", slot, " is not in use");
  return s;
}

void ModelCache::require_host(const char* what) const {
  if (!host_storage_) fail("this cache keeps its tensors on a device; ", what, " needs them on the host");
}

int ModelCache::acquire() {
  for (std::size_t i = 0; i < slots_.size(); ++i) {
    Slot& s = slots_[i];
    if (s.in_use) continue;
    s.in_use = true;
    s.length = 0;
    if (host_storage_ && state_floats() > 0) std::fill_n(slot_state(static_cast<int>(i)), state_floats(), 0.0f);
    return static_cast<int>(i);
  }
  fail("all ", slots_.size(), " sequence slots are in use");
}

int ModelCache::free_slots() const {
  return static_cast<int>(std::count_if(slots_.begin(), slots_.end(), [](const Slot& s) { return !s.in_use; }));
}

void ModelCache::release(int slot) {
  Slot& s = used_slot(slot);
  release_blocks(s.blocks);
  s = Slot{};
}

int64_t ModelCache::length(int slot) const { return slots_.at(static_cast<std::size_t>(slot)).length; }

int ModelCache::allocate_block() {
  int b;
  if (!free_blocks_.empty()) {
    b = free_blocks_.back();
    free_blocks_.pop_back();
  } else {
    if (max_blocks_ > 0 && block_count_ >= max_blocks_) fail("the KV cache is full (", max_blocks_, " blocks of ", block_size_, " tokens)");
    if (host_storage_ && max_blocks_ == 0)
      blocks_.push_back(std::make_unique<float[]>(static_cast<std::size_t>(n_attn_ * 2 * block_size_ * kv_row_)));
    b = block_count_++;
    refs_.push_back(0);
  }
  refs_[static_cast<std::size_t>(b)] = 1;
  ++blocks_in_use_;
  return b;
}

void ModelCache::retain_blocks(const std::vector<int>& blocks) {
  for (int b : blocks) {
    if (b < 0 || b >= block_count_ || refs_[static_cast<std::size_t>(b)] < 1) fail("internal: KV block ", b, " is not held");
    ++refs_[static_cast<std::size_t>(b)];
  }
}

void ModelCache::release_blocks(const std::vector<int>& blocks) {
  for (int b : blocks) {
    if (b < 0 || b >= block_count_ || refs_[static_cast<std::size_t>(b)] < 1) fail("internal: KV block ", b, " is not held");
    if (--refs_[static_cast<std::size_t>(b)] == 0) {
      free_blocks_.push_back(b);
      --blocks_in_use_;
    }
  }
}

void ModelCache::extend(int slot, int64_t new_length) {
  Slot& s = used_slot(slot);
  if (n_attn_ > 0) {
    // A partly filled last block that another holder shares is copied before rows go into it.
    if (new_length > s.length && s.length % block_size_ != 0 && refs_[static_cast<std::size_t>(s.blocks.back())] > 1) {
      const int own = allocate_block();
      if (host_storage_) std::memcpy(block_data(own), block_data(s.blocks.back()), kv_bytes_per_block());
      else if (device_state_) device_state_->copy_block(s.blocks.back(), own);  // (no device state: nothing written yet)
      release_blocks({s.blocks.back()});
      s.blocks.back() = own;
    }
    while (static_cast<int64_t>(s.blocks.size()) * block_size_ < new_length) s.blocks.push_back(allocate_block());
  }
  s.length = new_length;
}

float* ModelCache::block_data(int block) {
  const std::size_t floats = static_cast<std::size_t>(n_attn_ * 2 * block_size_ * kv_row_);
  return max_blocks_ > 0 ? pool_.get() + static_cast<std::size_t>(block) * floats : blocks_[static_cast<std::size_t>(block)].get();
}

float* ModelCache::kv(int attn_layer, int slot, int64_t position, int which) {
  require_host("the CPU path");
  const Slot& s = slots_[static_cast<std::size_t>(slot)];
  float* block = block_data(s.blocks[static_cast<std::size_t>(position / block_size_)]);
  return block + ((attn_layer * 2 + which) * block_size_ + position % block_size_) * kv_row_;
}

float* ModelCache::key(int attn_layer, int slot, int64_t position) { return kv(attn_layer, slot, position, 0); }
float* ModelCache::value(int attn_layer, int slot, int64_t position) { return kv(attn_layer, slot, position, 1); }

float* ModelCache::slot_state(int slot) { return states_.get() + static_cast<std::size_t>(slot) * static_cast<std::size_t>(state_floats()); }

float* ModelCache::conv_state(int gdn_layer, int slot) {
  require_host("the CPU path");
  return slot_state(slot) + gdn_layer * conv_floats_;
}
float* ModelCache::recurrent_state(int gdn_layer, int slot) {
  require_host("the CPU path");
  return slot_state(slot) + n_gdn_ * conv_floats_ + gdn_layer * recurrent_floats_;
}

std::vector<int> ModelCache::share_blocks(int slot, int64_t tokens) {
  const Slot& s = used_slot(slot);
  if (tokens < 0 || tokens > s.length) fail("internal: cannot share ", tokens, " tokens of a sequence of ", s.length);
  std::vector<int> blocks(s.blocks.begin(), s.blocks.begin() + static_cast<long>((tokens + block_size_ - 1) / block_size_));
  if (n_attn_ == 0) blocks.clear();
  retain_blocks(blocks);
  return blocks;
}

void ModelCache::keep_row_states(int slot, int rows) {
  Slot& s = used_slot(slot);
  if (rows < 1) fail("keep_row_states needs at least one row");
  s.row_start = s.length;
  s.row_count = rows;
  if (host_storage_) {
    s.row_conv.resize(static_cast<std::size_t>(rows * n_gdn_ * conv_floats_));
    s.row_recurrent.resize(static_cast<std::size_t>(rows * n_gdn_ * recurrent_floats_));
  }
}

float* ModelCache::row_conv_state(int gdn_layer, int slot, int64_t position) {
  Slot& s = slots_[static_cast<std::size_t>(slot)];
  const int64_t row = position - s.row_start;
  if (s.row_start < 0 || row < 0 || row >= s.row_count || s.row_conv.empty()) return nullptr;
  return s.row_conv.data() + (row * n_gdn_ + gdn_layer) * conv_floats_;
}

float* ModelCache::row_recurrent_state(int gdn_layer, int slot, int64_t position) {
  Slot& s = slots_[static_cast<std::size_t>(slot)];
  const int64_t row = position - s.row_start;
  if (s.row_start < 0 || row < 0 || row >= s.row_count || s.row_recurrent.empty()) return nullptr;
  return s.row_recurrent.data() + (row * n_gdn_ + gdn_layer) * recurrent_floats_;
}

void ModelCache::truncate(int slot, int64_t length) {
  Slot& s = used_slot(slot);
  if (length < 0 || length > s.length) fail("cannot truncate slot ", slot, " of ", s.length, " tokens to ", length);
  if (length < s.length && n_gdn_ > 0 && host_storage_) {
    if (!row_conv_state(0, slot, length - 1))
      fail("slot ", slot, ": the DeltaNet state after token ", length - 1, " was not kept (keep_row_states before the step)");
    for (int64_t l = 0; l < n_gdn_; ++l) {
      const float* c = row_conv_state(static_cast<int>(l), slot, length - 1);
      const float* r = row_recurrent_state(static_cast<int>(l), slot, length - 1);
      std::copy(c, c + conv_floats_, conv_state(static_cast<int>(l), slot));
      std::copy(r, r + recurrent_floats_, recurrent_state(static_cast<int>(l), slot));
    }
  } else if (length < s.length && n_gdn_ > 0) {
    const int64_t row = length - 1 - s.row_start;
    if (s.row_start < 0 || row < 0 || row >= s.row_count)
      fail("slot ", slot, ": the DeltaNet state after token ", length - 1, " was not kept (keep_row_states before the step)");
    device("truncate").restore_row_state(slot, static_cast<int>(row));
  }
  s.length = length;
  // Whole blocks past the new length go back (a block another holder shares stays theirs).
  const auto keep_blocks = static_cast<std::size_t>((length + block_size_ - 1) / block_size_);
  if (n_attn_ > 0 && s.blocks.size() > keep_blocks) {
    release_blocks(std::vector<int>(s.blocks.begin() + static_cast<long>(keep_blocks), s.blocks.end()));
    s.blocks.resize(keep_blocks);
  }
  drop_row_states(slot);
}

void ModelCache::drop_row_states(int slot) {
  Slot& s = slots_.at(static_cast<std::size_t>(slot));
  s.row_start = -1;
  s.row_count = 0;
}

void ModelCache::attach_prefix(int slot, const std::vector<int>& blocks, int64_t tokens) {
  Slot& s = used_slot(slot);
  if (s.length != 0 || !s.blocks.empty()) fail("internal: a prefix goes into a fresh slot");
  if (n_attn_ > 0 && static_cast<int64_t>(blocks.size()) != (tokens + block_size_ - 1) / block_size_)
    fail("internal: ", blocks.size(), " blocks do not hold ", tokens, " tokens");
  if (n_attn_ > 0) {
    retain_blocks(blocks);
    s.blocks = blocks;
  }
  s.length = tokens;
}

int64_t ModelCache::blocks_needed(int slot, int64_t new_length) const {
  const Slot& s = slots_.at(static_cast<std::size_t>(slot));
  if (n_attn_ == 0) return 0;
  const int64_t have = static_cast<int64_t>(s.blocks.size());
  int64_t need = std::max<int64_t>(0, (new_length + block_size_ - 1) / block_size_ - have);
  if (new_length > s.length && s.length % block_size_ != 0 && refs_[static_cast<std::size_t>(s.blocks.back())] > 1) ++need;  // copy on write
  return need;
}

DeviceCacheState& ModelCache::device(const char* what) const {
  if (!device_state_) fail("internal: ", what, " of a device cache before any step ran");
  return *device_state_;
}

int64_t ModelCache::snapshot_floats() const { return host_storage_ ? state_floats() : device("sizing a snapshot").state_floats(); }

StateSnapshot plain_snapshot(int64_t floats) {
  return StateSnapshot(new float[static_cast<std::size_t>(std::max<int64_t>(1, floats))], [](float* p) { delete[] p; });
}

StateSnapshot ModelCache::new_snapshot() const {
  return host_storage_ ? plain_snapshot(state_floats()) : device("making a snapshot").new_snapshot();
}

void ModelCache::save_state(int slot, float* dst) const {
  const_cast<ModelCache*>(this)->used_slot(slot);
  if (!host_storage_) return device("saving a state").save_state(slot, dst);
  const float* src = states_.get() + static_cast<std::size_t>(slot) * static_cast<std::size_t>(state_floats());
  std::copy_n(src, state_floats(), dst);
}

void ModelCache::load_state(int slot, const float* src) {
  used_slot(slot);
  if (!host_storage_) return device("loading a state").load_state(slot, src);
  std::copy_n(src, state_floats(), slot_state(slot));
}

void ModelCache::fork(int from, int to) {
  if (to == from) fail("internal: a sequence cannot fork into its own slot");
  const int64_t n = used_slot(from).length;
  std::vector<int> blocks = share_blocks(from, n);
  attach_prefix(to, blocks, n);
  release_blocks(blocks);
  if (!host_storage_) return device("forking a sequence").copy_state(from, to);
  std::copy_n(slot_state(from), state_floats(), slot_state(to));
}

std::size_t ModelCache::state_bytes_per_sequence() const { return static_cast<std::size_t>(state_floats()) * sizeof(float); }
std::size_t ModelCache::kv_bytes_per_token() const { return static_cast<std::size_t>(n_attn_ * 2 * kv_row_) * sizeof(float); }

}  // namespace qwenrt
