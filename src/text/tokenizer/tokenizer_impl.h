// The parts a loaded Tokenizer consists of. Internal: shared by tokenizer.cpp (encode/decode)
// and tokenizer_json_loader.cpp (construction from files).
#pragma once

#include <filesystem>
#include <optional>
#include <unordered_map>
#include <vector>

#include "text/tokenizer/tokenizer.h"
#include "text/tokenizer/tokenizer_added_tokens.h"
#include "text/tokenizer/tokenizer_bpe.h"
#include "text/tokenizer/tokenizer_pretokenizer.h"

namespace qwenrt::text {

struct Tokenizer::Impl {
  std::filesystem::path source;
  bool nfc = false;
  PreTokenizer pre_tokenizer;
  BpeModel model;
  std::vector<AddedToken> added;
  std::unordered_map<int32_t, std::size_t> added_by_id;  // id -> index into `added`
  AddedTokenMatcher raw_matcher;                         // added tokens with normalized = false
  AddedTokenMatcher normalized_matcher;                  // added tokens with normalized = true
  int32_t vocab_size = 0;
  std::optional<int32_t> bos, eos, pad;
  std::vector<int32_t> stop_ids;

  explicit Impl(BpeModel m) : model(std::move(m)) {}
};

Tokenizer make_tokenizer(std::shared_ptr<const Tokenizer::Impl> impl);

}  // namespace qwenrt::text
