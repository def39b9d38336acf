#include "cache/prefix_cache.h"

#include <algorithm>

#include "core/error.h"

namespace qwenrt {

namespace {
// Polynomial hash of a token prefix, extended one token at a time.
constexpr uint64_t kHashBase = 0x9E3779B97F4A7C15ull;
uint64_t extend_hash(uint64_t h, int32_t token) { return h * kHashBase + static_cast<uint64_t>(static_cast<uint32_t>(token)) + 1; }
uint64_t hash_of(std::span<const int32_t> tokens) {
  uint64_t h = 0;
  for (int32_t t : tokens) h = extend_hash(h, t);
  return h;
}
}  // namespace

PrefixCache::PrefixCache(ModelCache& cache, std::size_t max_bytes) : cache_(cache), max_bytes_(max_bytes) {}

PrefixCache::~PrefixCache() { clear(); }

std::size_t PrefixCache::entry_bytes(const Entry& e) const {
  return (e.tokens.size() + static_cast<std::size_t>(cache_.snapshot_floats())) * 4;
}

void PrefixCache::hold(const std::vector<int>& blocks) {
  for (int b : blocks)
    if (block_holds_[b]++ == 0) bytes_ += cache_.kv_bytes_per_block();
}

void PrefixCache::drop(const std::vector<int>& blocks) {
  for (int b : blocks) {
    auto it = block_holds_.find(b);
    if (--it->second == 0) {
      block_holds_.erase(it);
      bytes_ -= cache_.kv_bytes_per_block();
    }
  }
  cache_.release_blocks(blocks);
}

void PrefixCache::evict_last() {
  Entry& e = entries_.back();
  bytes_ -= entry_bytes(e);
  drop(e.blocks);
  entries_.pop_back();
  ++stats_.evictions;
}

PrefixCache::List::iterator PrefixCache::find(std::span<const int32_t> tokens, uint64_t hash) {
  for (auto it = entries_.begin(); it != entries_.end(); ++it)
    if (it->hash == hash && std::equal(it->tokens.begin(), it->tokens.end(), tokens.begin(), tokens.end())) return it;
  return entries_.end();
}

int64_t PrefixCache::match(std::span<const int32_t> prompt, int64_t limit) const {
  int64_t best = 0;
  if (enabled() && !entries_.empty()) {
    limit = std::min<int64_t>(limit, static_cast<int64_t>(prompt.size()));
    std::vector<uint64_t> prefix_hash(static_cast<std::size_t>(std::max<int64_t>(limit, 0)) + 1, 0);
    for (int64_t i = 0; i < limit; ++i)
      prefix_hash[static_cast<std::size_t>(i + 1)] = extend_hash(prefix_hash[static_cast<std::size_t>(i)], prompt[static_cast<std::size_t>(i)]);
    for (const Entry& e : entries_) {
      const int64_t n = static_cast<int64_t>(e.tokens.size());
      if (n <= best || n > limit || e.hash != prefix_hash[static_cast<std::size_t>(n)]) continue;
      if (std::equal(e.tokens.begin(), e.tokens.end(), prompt.begin())) best = n;
    }
  }
  return best;
}

void PrefixCache::record_lookup(int64_t tokens) {
  if (!enabled()) return;
  if (tokens > 0) ++stats_.hits, stats_.hit_tokens += tokens;
  else ++stats_.misses;
}

void PrefixCache::restore(std::span<const int32_t> prompt, int64_t tokens, int slot) {
  if (tokens < 1 || tokens > static_cast<int64_t>(prompt.size())) fail("internal: no cached prefix of ", tokens, " tokens");
  const auto it = find(prompt.first(static_cast<std::size_t>(tokens)), hash_of(prompt.first(static_cast<std::size_t>(tokens))));
  if (it == entries_.end()) fail("internal: the cached prefix of ", tokens, " tokens is gone");
  cache_.attach_prefix(slot, it->blocks, tokens);
  cache_.load_state(slot, it->state.get());
  entries_.splice(entries_.begin(), entries_, it);
}

void PrefixCache::insert(std::span<const int32_t> tokens, int slot) {
  if (!enabled() || tokens.empty()) return;
  const uint64_t hash = hash_of(tokens);
  if (auto it = find(tokens, hash); it != entries_.end()) {
    entries_.splice(entries_.begin(), entries_, it);
    return;
  }
  Entry e;
  e.tokens.assign(tokens.begin(), tokens.end());
  e.hash = hash;
  // What this entry adds: its tokens and snapshot, and the blocks no entry holds yet.
  std::size_t added = entry_bytes(e);
  const int64_t block_count = (static_cast<int64_t>(tokens.size()) + cache_.block_size() - 1) / cache_.block_size();
  const std::vector<int>& table = cache_.block_table(slot);
  for (int64_t i = 0; i < block_count && i < static_cast<int64_t>(table.size()); ++i)
    if (!block_holds_.count(table[static_cast<std::size_t>(i)])) added += cache_.kv_bytes_per_block();
  if (added > max_bytes_) return;
  e.state = cache_.new_snapshot();
  cache_.save_state(slot, e.state.get());
  e.blocks = cache_.share_blocks(slot, static_cast<int64_t>(tokens.size()));
  hold(e.blocks);
  bytes_ += entry_bytes(e);
  entries_.push_front(std::move(e));
  ++stats_.insertions;
  while (bytes_ > max_bytes_ && entries_.size() > 1) evict_last();
}

bool PrefixCache::evict_for_blocks(int64_t blocks) {
  while (cache_.free_blocks() < blocks && !entries_.empty()) evict_last();
  return cache_.free_blocks() >= blocks;
}

int64_t PrefixCache::evictable_blocks() const {
  int64_t n = 0;
  for (const auto& [block, holds] : block_holds_)
    if (cache_.block_refs(block) == holds) ++n;
  return n;
}

void PrefixCache::clear() {
  while (!entries_.empty()) evict_last();
}

PrefixCacheStats PrefixCache::stats() const {
  PrefixCacheStats s = stats_;
  s.entries = static_cast<int64_t>(entries_.size());
  s.bytes = bytes_;
  s.kv_bytes = block_holds_.size() * cache_.kv_bytes_per_block();
  s.state_bytes = bytes_ - s.kv_bytes;
  return s;
}

}  // namespace qwenrt
