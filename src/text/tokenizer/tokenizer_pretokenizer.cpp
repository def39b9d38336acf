// The pre-tokenizer: regex Split stages and ByteLevel cut normalized text into BPE pieces.
#include "text/tokenizer/tokenizer_pretokenizer.h"

namespace qwenrt::text {
namespace {

// One decode buffer per stage and thread, reused so that splitting does not allocate. Sized
// before the stages run: nested stages hold references into it.
std::vector<DecodedText>& decode_buffers(std::size_t stages) {
  thread_local std::vector<DecodedText> buffers;
  if (buffers.size() < stages) buffers.resize(stages);
  return buffers;
}

}  // namespace

void PreTokenizer::split(std::string_view utf8, const std::function<void(std::string_view)>& emit, RegexBudget* budget) const {
  if (utf8.empty()) return;
  if (stages_.empty()) {
    emit(utf8);
    return;
  }
  decode_buffers(stages_.size());
  RegexBudget own = RegexBudget::for_input(utf8.size());
  split_stage(0, utf8, emit, budget ? *budget : own);
}

void PreTokenizer::split_stage(std::size_t stage, std::string_view utf8, const std::function<void(std::string_view)>& emit,
                               RegexBudget& budget) const {
  const SplitStage& s = stages_[stage];
  DecodedText& text = decode_buffers(stages_.size())[stage];
  text.assign(utf8);

  auto pass_on = [&](std::size_t begin_cp, std::size_t end_cp, bool is_match) {
    if (begin_cp == end_cp) return;  // HF drops empty pieces
    if (s.invert) is_match = !is_match;
    if (is_match && s.remove_matches) return;
    const std::size_t b = text.byte_offsets[begin_cp];
    const std::size_t e = text.byte_offsets[end_cp];
    const std::string_view piece = utf8.substr(b, e - b);
    if (stage + 1 < stages_.size()) {
      split_stage(stage + 1, piece, emit, budget);
    } else {
      emit(piece);
    }
  };

  std::size_t pos = 0;  // code point index: end of the previous match
  std::size_t search = 0;
  while (search <= text.size()) {
    const auto m = s.regex.find(text, search, budget);
    if (!m) break;
    pass_on(pos, m->begin, false);
    pass_on(m->begin, m->end, true);
    pos = m->end;
    // After an empty match, move on one character (as Oniguruma's find iterator does).
    search = m->end > m->begin ? m->end : m->end + 1;
  }
  pass_on(pos, text.size(), false);
}

}  // namespace qwenrt::text
