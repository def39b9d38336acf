// Text <-> token ids for Qwen 3 / Qwen 3.5 (byte-level BPE from a Hugging Face tokenizer.json).
//
//   auto tok = qwenrt::text::Tokenizer::load("models/Qwen3-0.6B");   // dir or tokenizer.json
//   std::vector<int32_t> ids = tok.encode("<|im_start|>user\nHi<|im_end|>\n");
//   std::string text = tok.decode(ids);
//
// encode() reproduces Hugging Face tokenizers (`Tokenizer.encode(text, add_special_tokens=...)`
// with the file's own pipeline) id for id: added tokens are matched literally first, the text
// between them is NFC-normalized, split by the file's pre-tokenizer regex and BPE-encoded.
// A Tokenizer is immutable after load and safe to use from many threads; copies are cheap
// (they share the loaded data).
//
// Errors (missing/malformed files, unsupported tokenizer.json features, invalid UTF-8 input,
// unknown ids) throw TokenizerError.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "text/tokenizer/tokenizer_error.h"

namespace qwenrt::text {

// Token ids in tokenizer.json (vocab and added tokens) must be below kMaxTokenId, and the id space
// dense: the largest id may be at most kMaxTokenIdSparsity times the number of tokens (plus
// kTokenIdSlack). Tables are indexed by id, so this bounds what a file can make the loader allocate.
// Real vocabularies: ids 0..~250,000, dense.
inline constexpr int32_t kMaxTokenId = 1 << 24;  // 16,777,216
inline constexpr int64_t kMaxTokenIdSparsity = 16;
inline constexpr int64_t kTokenIdSlack = 65536;

struct AddedToken {
  int32_t id;
  std::string content;
  bool special;     // dropped by decode(..., skip_special = true)
  bool normalized;  // matched on normalized text instead of raw text
};

class Tokenizer {
 public:
  // `dir_or_file`: a model directory holding tokenizer.json (plus optional
  // tokenizer_config.json and generation_config.json), or a tokenizer.json path whose
  // directory may hold those config files.
  static Tokenizer load(const std::filesystem::path& dir_or_file);

  // With allow_special, added-token text such as "<|im_end|>" becomes its id; without, it is
  // encoded as ordinary text (use that for untrusted user content). Throws on invalid UTF-8.
  std::vector<int32_t> encode(std::string_view text, bool allow_special = true) const;

  // The concatenated token bytes, with each ill-formed UTF-8 subpart replaced by U+FFFD (HF's
  // errors="replace"). Throws on ids that have no token.
  std::string decode(std::span<const int32_t> ids, bool skip_special = false) const;
  // The raw concatenated bytes, possibly ending inside a UTF-8 character (for streaming).
  std::string decode_bytes(std::span<const int32_t> ids, bool skip_special = false) const;

  // Raw bytes of one token (an added token's content, or the vocab entry's bytes).
  std::string token_bytes(int32_t id) const;
  // Id of an added token's content, or of a vocab token given as raw bytes (" the", not "Ġthe").
  std::optional<int32_t> token_id(std::string_view token) const;

  // One past the largest id of any token (base vocab and added tokens). Model embedding
  // tables are usually padded beyond this; ids in between have no token.
  int32_t vocab_size() const;
  bool is_special(int32_t id) const;
  const std::vector<AddedToken>& added_tokens() const;

  // From tokenizer_config.json (nullopt when absent or null). Qwen has no BOS.
  std::optional<int32_t> bos_id() const;
  std::optional<int32_t> eos_id() const;
  std::optional<int32_t> pad_id() const;
  // Every id that should end generation: eos_id plus generation_config.json "eos_token_id"
  // (Qwen lists both <|im_end|> and <|endoftext|>), without duplicates.
  const std::vector<int32_t>& stop_ids() const;

  // What was loaded, for diagnostics.
  std::size_t merge_count() const;
  const std::filesystem::path& source() const;

  struct Impl;  // defined in tokenizer.cpp; built by the loader

 private:
  explicit Tokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  friend Tokenizer make_tokenizer(std::shared_ptr<const Tokenizer::Impl> impl);
  std::shared_ptr<const Impl> impl_;
};

}  // namespace qwenrt::text
