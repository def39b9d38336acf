// Byte-level BPE merges for one piece, in HF tokenizers' order (scan for short pieces, heap for long ones).
#include "text/tokenizer/tokenizer_bpe.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <queue>

#include "text/tokenizer/tokenizer_error.h"

namespace qwenrt::text {

namespace {

constexpr int32_t kNoRank = std::numeric_limits<int32_t>::max();

// Pieces up to this many bytes use the quadratic scan (cache-friendly, no heap); longer ones
// the O(n log n) heap, so that pathological inputs (a megabyte of one letter) stay fast.
constexpr std::size_t kScanLimit = 48;
// merge_by_scan keeps its state on the stack; it handles pieces up to this size itself.
constexpr std::size_t kScanCapacity = 256;

uint64_t hash_bytes(std::string_view bytes) {
  // The low bits pick the slot, the high 32 bits are kept as a tag to skip most compares.
  const uint64_t h = std::hash<std::string_view>{}(bytes);
  return h ^ (h << 32) ^ (h >> 29);
}

}  // namespace

// Open-addressing hash table keyed by the id pair: the merge loop does one lookup per
// adjacent pair, and std::unordered_map's node chasing would dominate encoding time.
struct BpeModel::PairTable {
  struct Slot {
    uint64_t key = kEmpty;
    int32_t rank = 0;
    int32_t merged = 0;
  };
  static constexpr uint64_t kEmpty = std::numeric_limits<uint64_t>::max();

  std::vector<Slot> slots;
  uint64_t mask = 0;

  static uint64_t key_of(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
  }
  std::size_t slot_of(uint64_t key) const { return static_cast<std::size_t>((key * 0x9E3779B97F4A7C15ull) >> 17) & mask; }

  void reserve(std::size_t n) {
    std::size_t cap = 16;
    while (cap < n * 2) cap <<= 1;
    slots.assign(cap, Slot{});
    mask = cap - 1;
  }

  // A later duplicate overwrites an earlier one, as HF's merge map (built by collecting the
  // merge list into a hash map) does.
  void put(int32_t left, int32_t right, int32_t rank, int32_t merged) {
    const uint64_t key = key_of(left, right);
    std::size_t i = slot_of(key);
    while (slots[i].key != kEmpty && slots[i].key != key) i = (i + 1) & mask;
    slots[i] = {key, rank, merged};
  }

  // Rank of the pair (kNoRank if it is not a merge) and the merged id.
  int32_t find(int32_t left, int32_t right, int32_t& merged) const {
    const uint64_t key = key_of(left, right);
    std::size_t i = slot_of(key);
    while (true) {
      const Slot& s = slots[i];
      if (s.key == key) {
        merged = s.merged;
        return s.rank;
      }
      if (s.key == kEmpty) return kNoRank;
      i = (i + 1) & mask;
    }
  }
};

BpeModel::BpeModel() = default;
BpeModel::BpeModel(BpeModel&&) noexcept = default;
BpeModel& BpeModel::operator=(BpeModel&&) noexcept = default;
BpeModel::~BpeModel() = default;

BpeModel BpeModel::build(std::vector<BpeVocabEntry> vocab, const std::vector<BpeMerge>& merges, bool ignore_merges, const std::string& source) {
  BpeModel m;
  m.ignore_merges_ = ignore_merges;
  int32_t max_id = -1;
  for (const auto& e : vocab) {
    if (e.id < 0) throw TokenizerError(source + ": negative token id " + std::to_string(e.id));
    max_id = std::max(max_id, e.id);
  }
  m.id_to_bytes_.resize(static_cast<std::size_t>(max_id + 1));
  m.is_vocab_id_.assign(static_cast<std::size_t>(max_id + 1), false);
  std::size_t capacity = 16;
  while (capacity < vocab.size() * 2) capacity <<= 1;
  m.token_slots_.assign(capacity, 0);
  m.token_mask_ = capacity - 1;
  for (auto& e : vocab) {
    if (m.is_vocab_id_[static_cast<std::size_t>(e.id)]) {
      throw TokenizerError(source + ": token id " + std::to_string(e.id) + " is used twice");
    }
    const uint64_t hash = hash_bytes(e.bytes);
    if (m.find_token(e.bytes, hash)) {
      throw TokenizerError(source + ": two vocab entries have the same bytes (id " + std::to_string(e.id) + ")");
    }
    m.is_vocab_id_[static_cast<std::size_t>(e.id)] = true;
    m.id_to_bytes_[static_cast<std::size_t>(e.id)] = std::move(e.bytes);
    std::size_t i = hash & m.token_mask_;
    while (m.token_slots_[i] != 0) i = (i + 1) & m.token_mask_;
    m.token_slots_[i] = (hash & 0xFFFFFFFF00000000ull) | static_cast<uint32_t>(e.id + 1);
    ++m.token_count_;
  }
  for (int b = 0; b < 256; ++b) {
    const auto id = m.id_of(std::string(1, static_cast<char>(b)));
    if (!id) {
      throw TokenizerError(source + ": vocab has no token for byte " + std::to_string(b) + "; byte-level BPE needs all 256");
    }
    m.byte_ids_[static_cast<std::size_t>(b)] = *id;
  }

  m.pairs_ = std::make_unique<PairTable>();
  m.pairs_->reserve(merges.size());
  for (std::size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& merge = merges[rank];
    const auto left = m.id_of(merge.left);
    const auto right = m.id_of(merge.right);
    const auto merged = m.id_of(merge.left + merge.right);
    if (!left || !right || !merged) {
      throw TokenizerError(source + ": merge #" + std::to_string(rank) + " uses a token that is not in the vocab");
    }
    m.pairs_->put(*left, *right, static_cast<int32_t>(rank), *merged);
  }
  m.merge_count_ = merges.size();

  m.encodes_to_itself_.assign(m.id_to_bytes_.size(), false);
  std::vector<int32_t> ids;
  for (std::size_t id = 0; id < m.id_to_bytes_.size(); ++id) {
    if (!m.is_vocab_id_[id]) continue;
    ids.clear();
    const std::string& bytes = m.id_to_bytes_[id];
    if (bytes.size() <= kScanLimit) {
      m.merge_by_scan(bytes, ids);
    } else {
      m.merge_by_heap(bytes, ids);
    }
    m.encodes_to_itself_[id] = ids.size() == 1 && ids[0] == static_cast<int32_t>(id);
  }
  return m;
}

std::optional<int32_t> BpeModel::find_token(std::string_view bytes, uint64_t hash) const {
  const uint64_t tag = hash & 0xFFFFFFFF00000000ull;
  for (std::size_t i = hash & token_mask_;; i = (i + 1) & token_mask_) {
    const uint64_t slot = token_slots_[i];
    if (slot == 0) return std::nullopt;
    if ((slot & 0xFFFFFFFF00000000ull) == tag) {
      const auto id = static_cast<int32_t>(static_cast<uint32_t>(slot) - 1);
      if (id_to_bytes_[static_cast<std::size_t>(id)] == bytes) return id;
    }
  }
}

std::optional<int32_t> BpeModel::id_of(std::string_view bytes) const { return find_token(bytes, hash_bytes(bytes)); }

const std::string* BpeModel::bytes_of(int32_t id) const {
  if (id < 0 || id >= id_limit() || !is_vocab_id_[static_cast<std::size_t>(id)]) return nullptr;
  return &id_to_bytes_[static_cast<std::size_t>(id)];
}

void BpeModel::encode_piece(std::string_view piece, std::vector<int32_t>& out) const {
  if (piece.size() == 1) {
    out.push_back(byte_ids_[static_cast<unsigned char>(piece[0])]);
    return;
  }
  if (const auto id = id_of(piece)) {
    if (ignore_merges_ || encodes_to_itself_[static_cast<std::size_t>(*id)]) {
      out.push_back(*id);
      return;
    }
  }
  if (cache_->lookup(piece, out)) return;
  const std::size_t first = out.size();
  if (piece.size() <= kScanLimit) {
    merge_by_scan(piece, out);
  } else {
    merge_by_heap(piece, out);
  }
  cache_->insert(piece, out.data() + first, out.size() - first);
}

void BpeModel::merge_by_scan(std::string_view piece, std::vector<int32_t>& out) const {
  // ids[i] are the current symbols; ranks[i]/merged[i] describe the pair (ids[i], ids[i+1]).
  const std::size_t n = piece.size();
  if (n > kScanCapacity) {
    merge_by_heap(piece, out);
    return;
  }
  int32_t ids[kScanCapacity];
  int32_t ranks[kScanCapacity];
  int32_t merged[kScanCapacity];
  for (std::size_t i = 0; i < n; ++i) ids[i] = byte_ids_[static_cast<unsigned char>(piece[i])];
  std::size_t count = n;
  for (std::size_t i = 0; i + 1 < count; ++i) ranks[i] = pairs_->find(ids[i], ids[i + 1], merged[i]);
  while (count > 1) {
    std::size_t best = 0;
    for (std::size_t i = 1; i + 1 < count; ++i) {
      if (ranks[i] < ranks[best]) best = i;  // strict: the leftmost of equal ranks wins
    }
    if (ranks[best] == kNoRank) break;
    ids[best] = merged[best];
    for (std::size_t i = best + 1; i + 1 < count; ++i) {
      ids[i] = ids[i + 1];
      ranks[i] = ranks[i + 1];
      merged[i] = merged[i + 1];
    }
    --count;
    if (best > 0) ranks[best - 1] = pairs_->find(ids[best - 1], ids[best], merged[best - 1]);
    if (best + 1 < count) ranks[best] = pairs_->find(ids[best], ids[best + 1], merged[best]);
  }
  out.insert(out.end(), ids, ids + count);
}

void BpeModel::merge_by_heap(std::string_view piece, std::vector<int32_t>& out) const {
  struct Symbol {
    int32_t id;
    int32_t prev;
    int32_t next;
  };
  struct Candidate {
    int32_t rank;
    int32_t pos;  // index of the left symbol in the original sequence
    int32_t merged;
    bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  const auto n = static_cast<int32_t>(piece.size());
  std::vector<Symbol> symbols(static_cast<std::size_t>(n));
  for (int32_t i = 0; i < n; ++i) {
    symbols[static_cast<std::size_t>(i)] = {byte_ids_[static_cast<unsigned char>(piece[static_cast<std::size_t>(i)])], i - 1, i + 1 < n ? i + 1 : -1};
  }
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> queue;
  auto consider = [&](int32_t pos) {
    const int32_t next = symbols[static_cast<std::size_t>(pos)].next;
    if (next < 0) return;
    int32_t merged = 0;
    const int32_t rank = pairs_->find(symbols[static_cast<std::size_t>(pos)].id, symbols[static_cast<std::size_t>(next)].id, merged);
    if (rank != kNoRank) queue.push({rank, pos, merged});
  };
  for (int32_t i = 0; i + 1 < n; ++i) consider(i);
  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    Symbol& left = symbols[static_cast<std::size_t>(top.pos)];
    if (left.id < 0 || left.next < 0) continue;  // merged away, or now last
    Symbol& right = symbols[static_cast<std::size_t>(left.next)];
    // Stale if either side changed since the candidate was queued: the pair no longer
    // produces the same token.
    int32_t merged = 0;
    if (pairs_->find(left.id, right.id, merged) != top.rank || merged != top.merged) continue;
    left.id = merged;
    right.id = -1;
    left.next = right.next;
    if (right.next >= 0) symbols[static_cast<std::size_t>(right.next)].prev = top.pos;
    if (left.prev >= 0) consider(left.prev);
    consider(top.pos);
  }
  for (int32_t i = 0; i >= 0; i = symbols[static_cast<std::size_t>(i)].next) {
    out.push_back(symbols[static_cast<std::size_t>(i)].id);
  }
}

}  // namespace qwenrt::text
