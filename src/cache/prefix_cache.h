#pragma once
// The prefix cache of a hybrid model: a chat resends its whole history each turn, so the state
// after a prompt's first p tokens is kept to start the next request with the same first p tokens.
// Attention layers need only the KV of those tokens (blocks shared by reference); DeltaNet layers
// keep one recurrent state and conv ring, which cannot be cut back to an earlier position, so a
// snapshot of every DeltaNet layer is taken at the positions the scheduler chooses (chunk
// boundaries that keep results bitwise the same as a full prefill).
//
// Each entry is one snapshot: the tokens [0, p), the KV blocks holding them (one reference each)
// and the DeltaNet state at p. Entries are evicted least recently used first, to stay within
// `max_bytes` (KV blocks counted once however many entries share them, plus the snapshots and the
// tokens), or when the KV pool needs the blocks back (evict_for_blocks). On a GPU the snapshots of
// the DeltaNet state are copied to host memory and back.
#include <cstdint>
#include <list>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "cache/model_cache.h"

namespace qwenrt {

struct PrefixCacheStats {
  int64_t entries = 0;
  std::size_t bytes = 0, kv_bytes = 0, state_bytes = 0;
  int64_t hits = 0, misses = 0;  // lookups that found a prefix / found none
  int64_t hit_tokens = 0;        // prompt tokens served from the cache
  int64_t insertions = 0, evictions = 0;
};

class PrefixCache {
 public:
  PrefixCache(ModelCache& cache, std::size_t max_bytes);
  ~PrefixCache();
  PrefixCache(const PrefixCache&) = delete;
  PrefixCache& operator=(const PrefixCache&) = delete;

  bool enabled() const { return max_bytes_ > 0; }

  // The longest cached prefix of `prompt` of at most `limit` tokens: its length, 0 when none.
  int64_t match(std::span<const int32_t> prompt, int64_t limit) const;
  // Counts a lookup that was used: a hit of `tokens` tokens, or a miss (0).
  void record_lookup(int64_t tokens);
  // Starts the fresh slot `slot` as the entry of exactly `tokens` tokens (match's answer) that
  // `prompt` begins with: KV shared, DeltaNet state loaded; the entry becomes the most recent.
  void restore(std::span<const int32_t> prompt, int64_t tokens, int slot);

  // Records slot `slot`'s state now that it holds exactly `tokens` = its first tokens.size() tokens.
  // Does nothing when disabled, when one snapshot alone is over the cap, or when the entry exists.
  void insert(std::span<const int32_t> tokens, int slot);

  // Evicts least recently used entries until `blocks` KV blocks of the pool are free or nothing is
  // left to evict (blocks a running sequence shares stay in use). Returns whether they are free.
  bool evict_for_blocks(int64_t blocks);
  // KV blocks that evicting everything would free (held by no sequence).
  int64_t evictable_blocks() const;
  void clear();

  PrefixCacheStats stats() const;
  std::size_t max_bytes() const { return max_bytes_; }

 private:
  struct Entry {
    std::vector<int32_t> tokens;
    std::vector<int> blocks;
    StateSnapshot state;  // the cache's snapshot_floats() floats
    uint64_t hash = 0;
  };
  using List = std::list<Entry>;  // most recent first
  std::size_t entry_bytes(const Entry& e) const;
  void evict_last();
  void hold(const std::vector<int>& blocks);
  void drop(const std::vector<int>& blocks);
  List::iterator find(std::span<const int32_t> tokens, uint64_t hash);

  ModelCache& cache_;
  std::size_t max_bytes_;
  List entries_;
  std::unordered_map<int, int> block_holds_;  // block id -> entries holding it
  std::size_t bytes_ = 0;                     // tokens + snapshots of every entry + distinct blocks
  PrefixCacheStats stats_;
};

}  // namespace qwenrt
