// Byte-level BPE: one pre-tokenized piece (raw bytes) -> token ids, by applying merges in rank
// order exactly as Hugging Face tokenizers' BPE model does (lowest rank first; among equal
// ranks the leftmost pair).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "text/tokenizer/tokenizer_bpe_cache.h"

namespace qwenrt::text {

struct BpeVocabEntry {
  std::string bytes;  // raw bytes (ByteLevel alphabet already decoded)
  int32_t id;
};

struct BpeMerge {
  std::string left, right;  // raw bytes
};

class BpeModel {
 public:
  // `source` names the file in error messages. Throws TokenizerError if a merge names a token
  // that is not in the vocab, if the merged token is missing, if ids are duplicated or
  // negative, or if a single-byte token is missing (byte-level BPE needs all 256).
  // With `ignore_merges` a piece that is itself a vocab token is emitted as is (HF semantics).
  static BpeModel build(std::vector<BpeVocabEntry> vocab, const std::vector<BpeMerge>& merges, bool ignore_merges, const std::string& source);

  BpeModel(BpeModel&&) noexcept;
  BpeModel& operator=(BpeModel&&) noexcept;
  ~BpeModel();

  // Appends the ids of `piece` (non-empty raw bytes) to `out`.
  void encode_piece(std::string_view piece, std::vector<int32_t>& out) const;

  std::optional<int32_t> id_of(std::string_view bytes) const;
  // The raw bytes of vocab id `id`, or nullptr if `id` is not a vocab id.
  const std::string* bytes_of(int32_t id) const;
  // One past the largest vocab id.
  int32_t id_limit() const { return static_cast<int32_t>(id_to_bytes_.size()); }
  std::size_t vocab_count() const { return token_count_; }
  std::size_t merge_count() const { return merge_count_; }

  // Both merge strategies, exposed so tests can check they agree; encode_piece picks one by
  // piece length.
  void merge_by_scan(std::string_view piece, std::vector<int32_t>& out) const;
  void merge_by_heap(std::string_view piece, std::vector<int32_t>& out) const;

  struct PairTable;  // (left id, right id) -> (rank, merged id); defined in tokenizer_bpe.cpp

 private:
  BpeModel();

  // Bytes -> id index over id_to_bytes_, open addressing: every piece is looked up once (the
  // whole-token shortcut), and node-based maps made that lookup the hottest spot of encoding.
  // A slot holds (32 hash bits << 32) | (id + 1); 0 is empty.
  std::optional<int32_t> find_token(std::string_view bytes, uint64_t hash) const;
  std::vector<uint64_t> token_slots_;
  uint64_t token_mask_ = 0;
  std::size_t token_count_ = 0;

  std::vector<std::string> id_to_bytes_;
  std::vector<bool> is_vocab_id_;
  // Ids whose own bytes encode to exactly that id: for these a whole-piece vocab hit is the
  // answer without running merges (true for every Qwen3 token, not for merge-less ones).
  std::vector<bool> encodes_to_itself_;
  std::array<int32_t, 256> byte_ids_{};
  std::unique_ptr<PairTable> pairs_;
  std::size_t merge_count_ = 0;
  bool ignore_merges_ = false;
  std::unique_ptr<BpeCache> cache_ = std::make_unique<BpeCache>();  // heap: keeps the model movable
};

}  // namespace qwenrt::text
