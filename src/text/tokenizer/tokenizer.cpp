// Encoding and decoding; loading is in tokenizer_json_loader.cpp.
#include "text/tokenizer/tokenizer.h"

#include "text/tokenizer/tokenizer_impl.h"
#include "text/unicode/unicode_normalize.h"
#include "text/unicode/unicode_utf8.h"

namespace qwenrt::text {

Tokenizer make_tokenizer(std::shared_ptr<const Tokenizer::Impl> impl) { return Tokenizer(std::move(impl)); }

namespace {

// normalize -> (normalized added tokens) -> pre-tokenize -> BPE, for text that contains no
// raw added token.
void encode_ordinary(const Tokenizer::Impl& t, std::string_view text, bool allow_special, std::vector<int32_t>& out, RegexBudget& budget) {
  if (text.empty()) return;
  std::string normalized;
  std::string_view view = text;
  if (t.nfc && !is_nfc_quick(text)) {
    normalized = to_nfc(text);
    view = normalized;
  }
  auto encode_pieces = [&](std::string_view segment) {
    t.pre_tokenizer.split(
        segment, [&](std::string_view piece) { t.model.encode_piece(piece, out); }, &budget);
  };
  if (!allow_special || t.normalized_matcher.empty()) {
    encode_pieces(view);
    return;
  }
  std::size_t pos = 0;
  while (const auto hit = t.normalized_matcher.find(view, pos)) {
    encode_pieces(view.substr(pos, hit->begin - pos));
    out.push_back(hit->id);
    pos = hit->end;
  }
  encode_pieces(view.substr(pos));
}

}  // namespace

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool allow_special) const {
  if (const auto bad = utf8::find_invalid(text)) {
    throw TokenizerError("tokenizer encode: input is not valid UTF-8 (ill-formed sequence at byte " + std::to_string(*bad) + " of " +
                         std::to_string(text.size()) + ")");
  }
  const Impl& t = *impl_;
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 4);
  // One regex budget for the whole input (NFC may lengthen a text: up to 3x, counted in).
  RegexBudget budget = RegexBudget::for_input(3 * text.size());
  if (!allow_special || t.raw_matcher.empty()) {
    encode_ordinary(t, text, allow_special, out, budget);
    return out;
  }
  std::size_t pos = 0;
  while (const auto hit = t.raw_matcher.find(text, pos)) {
    encode_ordinary(t, text.substr(pos, hit->begin - pos), allow_special, out, budget);
    out.push_back(hit->id);
    pos = hit->end;
  }
  encode_ordinary(t, text.substr(pos), allow_special, out, budget);
  return out;
}

std::string Tokenizer::decode_bytes(std::span<const int32_t> ids, bool skip_special) const {
  const Impl& t = *impl_;
  std::string out;
  out.reserve(ids.size() * 4);
  for (const int32_t id : ids) {
    if (const auto it = t.added_by_id.find(id); it != t.added_by_id.end()) {
      const AddedToken& a = t.added[it->second];
      if (!(skip_special && a.special)) out += a.content;
      continue;
    }
    const std::string* bytes = t.model.bytes_of(id);
    if (bytes == nullptr) {
      throw TokenizerError("tokenizer decode: id " + std::to_string(id) + " has no token (vocab size " + std::to_string(t.vocab_size) + ")");
    }
    out += *bytes;
  }
  return out;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special) const {
  std::string bytes = decode_bytes(ids, skip_special);
  if (!utf8::find_invalid(bytes)) return bytes;
  return utf8::repair_lossy(bytes);
}

std::string Tokenizer::token_bytes(int32_t id) const {
  const int32_t one[1] = {id};
  return decode_bytes(one, false);
}

std::optional<int32_t> Tokenizer::token_id(std::string_view token) const {
  for (const AddedToken& a : impl_->added) {
    if (a.content == token) return a.id;
  }
  return impl_->model.id_of(token);
}

int32_t Tokenizer::vocab_size() const { return impl_->vocab_size; }

bool Tokenizer::is_special(int32_t id) const {
  const auto it = impl_->added_by_id.find(id);
  return it != impl_->added_by_id.end() && impl_->added[it->second].special;
}

const std::vector<AddedToken>& Tokenizer::added_tokens() const { return impl_->added; }
std::optional<int32_t> Tokenizer::bos_id() const { return impl_->bos; }
std::optional<int32_t> Tokenizer::eos_id() const { return impl_->eos; }
std::optional<int32_t> Tokenizer::pad_id() const { return impl_->pad; }
const std::vector<int32_t>& Tokenizer::stop_ids() const { return impl_->stop_ids; }
std::size_t Tokenizer::merge_count() const { return impl_->model.merge_count(); }
const std::filesystem::path& Tokenizer::source() const { return impl_->source; }

}  // namespace qwenrt::text
