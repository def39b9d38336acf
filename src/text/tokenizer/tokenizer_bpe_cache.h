// A bounded, thread-safe cache of piece bytes -> token ids for the BPE model. Text repeats
// words constantly, and a lookup is much cheaper than re-running the merges. Sharded so that
// concurrent encoders rarely contend; a full shard is simply cleared (old entries are as likely
// to be stale as the new one is to repeat), which keeps memory bounded without LRU bookkeeping.
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace qwenrt::text {

class BpeCache {
 public:
  // Pieces longer than this are not cached (long pieces rarely repeat and cost memory).
  static constexpr std::size_t kMaxPieceBytes = 256;

  explicit BpeCache(std::size_t capacity_per_shard = 4096) : capacity_(capacity_per_shard) {}

  // Appends the cached ids to `out` and returns true on a hit.
  bool lookup(std::string_view piece, std::vector<int32_t>& out) const;
  void insert(std::string_view piece, const int32_t* ids, std::size_t count) const;

 private:
  struct Hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  struct Shard {
    std::mutex mutex;
    std::unordered_map<std::string, std::vector<int32_t>, Hash, std::equal_to<>> map;
  };
  static constexpr std::size_t kShards = 16;

  Shard& shard_for(std::string_view piece, std::size_t& hash) const;

  std::size_t capacity_;
  mutable std::array<Shard, kShards> shards_;
};

}  // namespace qwenrt::text
