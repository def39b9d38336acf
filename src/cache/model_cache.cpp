#include "cache/model_cache.h"

#include <algorithm>

#include "core/error.h"

namespace qwenrt {

ModelCache::ModelCache(const CacheShape& shape, int max_sequences, int64_t block_size, bool host_storage)
    : block_size_(block_size),
      n_attn_(shape.attention_layers),
      n_gdn_(shape.deltanet_layers),
      kv_row_(shape.kv_row),
      conv_floats_(shape.conv_floats),
      recurrent_floats_(shape.recurrent_floats),
      slots_(static_cast<std::size_t>(max_sequences)),
      host_storage_(host_storage) {
  if (max_sequences < 1) fail("cache needs at least one sequence slot");
  if (block_size < 1) fail("cache block size must be positive");
}

int ModelCache::acquire() {
  for (std::size_t i = 0; i < slots_.size(); ++i) {
    Slot& s = slots_[i];
    if (s.in_use) continue;
    s.in_use = true;
    s.length = 0;
    if (host_storage_) {
      s.conv.assign(static_cast<std::size_t>(conv_floats_ * n_gdn_), 0.0f);
      s.recurrent.assign(static_cast<std::size_t>(recurrent_floats_ * n_gdn_), 0.0f);
    }
    return static_cast<int>(i);
  }
  fail("all ", slots_.size(), " sequence slots are in use");
}

void ModelCache::release(int slot) {
  Slot& s = slots_.at(static_cast<std::size_t>(slot));
  if (!s.in_use) fail("sequence slot ", slot, " is not in use");
  free_blocks_.insert(free_blocks_.end(), s.blocks.begin(), s.blocks.end());
  s = Slot{};
}

int64_t ModelCache::length(int slot) const { return slots_.at(static_cast<std::size_t>(slot)).length; }

int ModelCache::allocate_block() {
  if (!free_blocks_.empty()) {
    int b = free_blocks_.back();
    free_blocks_.pop_back();
    return b;
  }
  if (host_storage_) blocks_.push_back(std::make_unique<float[]>(static_cast<std::size_t>(n_attn_ * 2 * block_size_ * kv_row_)));
  return block_count_++;
}

void ModelCache::extend(int slot, int64_t new_length) {
  Slot& s = slots_.at(static_cast<std::size_t>(slot));
  if (!s.in_use) fail("sequence slot ", slot, " is not in use");
  if (n_attn_ > 0)
    while (static_cast<int64_t>(s.blocks.size()) * block_size_ < new_length) s.blocks.push_back(allocate_block());
  s.length = new_length;
}

float* ModelCache::kv(int attn_layer, int slot, int64_t position, int which) {
  if (!host_storage_) fail("this cache keeps its tensors on a device; the CPU path cannot read them");
  const Slot& s = slots_[static_cast<std::size_t>(slot)];
  float* block = blocks_[static_cast<std::size_t>(s.blocks[static_cast<std::size_t>(position / block_size_)])].get();
  return block + ((attn_layer * 2 + which) * block_size_ + position % block_size_) * kv_row_;
}

float* ModelCache::key(int attn_layer, int slot, int64_t position) { return kv(attn_layer, slot, position, 0); }
float* ModelCache::value(int attn_layer, int slot, int64_t position) { return kv(attn_layer, slot, position, 1); }

float* ModelCache::conv_state(int gdn_layer, int slot) {
  if (!host_storage_) fail("this cache keeps its tensors on a device; the CPU path cannot read them");
  return slots_[static_cast<std::size_t>(slot)].conv.data() + gdn_layer * conv_floats_;
}
float* ModelCache::recurrent_state(int gdn_layer, int slot) {
  if (!host_storage_) fail("this cache keeps its tensors on a device; the CPU path cannot read them");
  return slots_[static_cast<std::size_t>(slot)].recurrent.data() + gdn_layer * recurrent_floats_;
}

void ModelCache::keep_row_states(int slot, int rows) {
  Slot& s = slots_.at(static_cast<std::size_t>(slot));
  if (!s.in_use) fail("sequence slot ", slot, " is not in use");
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
  Slot& s = slots_.at(static_cast<std::size_t>(slot));
  if (!s.in_use) fail("sequence slot ", slot, " is not in use");
  if (length < 0 || length > s.length) fail("cannot truncate slot ", slot, " of ", s.length, " tokens to ", length);
  if (length < s.length && n_gdn_ > 0 && host_storage_) {
    if (!row_conv_state(0, slot, length - 1))
      fail("slot ", slot, ": the DeltaNet state after token ", length - 1, " was not kept (keep_row_states before the step)");
    for (int64_t l = 0; l < n_gdn_; ++l) {
      const float* c = row_conv_state(static_cast<int>(l), slot, length - 1);
      const float* r = row_recurrent_state(static_cast<int>(l), slot, length - 1);
      std::copy(c, c + conv_floats_, s.conv.data() + l * conv_floats_);
      std::copy(r, r + recurrent_floats_, s.recurrent.data() + l * recurrent_floats_);
    }
  } else if (length < s.length && n_gdn_ > 0) {
    fail("slot ", slot, ": truncating a device cache is not supported yet");
  }
  s.length = length;
  const auto keep_blocks = static_cast<std::size_t>((length + block_size_ - 1) / block_size_);
  while (s.blocks.size() > keep_blocks) {
    free_blocks_.push_back(s.blocks.back());
    s.blocks.pop_back();
  }
  drop_row_states(slot);
}

void ModelCache::drop_row_states(int slot) {
  Slot& s = slots_.at(static_cast<std::size_t>(slot));
  s.row_start = -1;
  s.row_count = 0;
}

std::size_t ModelCache::state_bytes_per_sequence() const {
  return static_cast<std::size_t>((conv_floats_ + recurrent_floats_) * n_gdn_) * sizeof(float);
}
std::size_t ModelCache::kv_bytes_per_token() const { return static_cast<std::size_t>(n_attn_ * 2 * kv_row_) * sizeof(float); }

}  // namespace qwenrt
