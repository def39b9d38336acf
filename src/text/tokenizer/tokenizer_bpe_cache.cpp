// The sharded, bounded cache of piece bytes -> token ids used by BPE.
#include "text/tokenizer/tokenizer_bpe_cache.h"

namespace qwenrt::text {

BpeCache::Shard& BpeCache::shard_for(std::string_view piece, std::size_t& hash) const {
  hash = Hash{}(piece);
  // The low bits pick the bucket inside the map; use high bits for the shard.
  return shards_[(hash >> 56) % kShards];
}

bool BpeCache::lookup(std::string_view piece, std::vector<int32_t>& out) const {
  if (piece.size() > kMaxPieceBytes) return false;
  std::size_t hash = 0;
  Shard& shard = shard_for(piece, hash);
  std::lock_guard<std::mutex> lock(shard.mutex);
  const auto it = shard.map.find(piece);
  if (it == shard.map.end()) return false;
  out.insert(out.end(), it->second.begin(), it->second.end());
  return true;
}

void BpeCache::insert(std::string_view piece, const int32_t* ids, std::size_t count) const {
  if (piece.size() > kMaxPieceBytes || capacity_ == 0) return;
  std::size_t hash = 0;
  Shard& shard = shard_for(piece, hash);
  std::lock_guard<std::mutex> lock(shard.mutex);
  if (shard.map.size() >= capacity_) shard.map.clear();
  shard.map.try_emplace(std::string(piece), ids, ids + count);
}

}  // namespace qwenrt::text
