// NFC normalization (quick check, decomposition, canonical ordering, composition) with HF tokenizers' data.
#include "text/unicode/unicode_normalize.h"

#include <algorithm>
#include <vector>

#include "text/unicode/unicode_data.h"
#include "text/unicode/unicode_utf8.h"

namespace qwenrt::text {
namespace {

namespace ud = unicode_data;

// Hangul syllables are composed/decomposed arithmetically (Unicode 3.12).
constexpr char32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr char32_t kLCount = 19, kVCount = 21, kTCount = 28;
constexpr char32_t kNCount = kVCount * kTCount, kSCount = kLCount * kNCount;

void decompose_into(char32_t cp, std::vector<char32_t>& out) {
  if (cp >= kSBase && cp < kSBase + kSCount) {
    const char32_t s = cp - kSBase;
    out.push_back(kLBase + s / kNCount);
    out.push_back(kVBase + (s % kNCount) / kTCount);
    if (s % kTCount != 0) out.push_back(kTBase + s % kTCount);
    return;
  }
  const auto full = ud::canonical_decomposition(cp);
  if (full.empty()) {
    out.push_back(cp);
  } else {
    out.insert(out.end(), full.begin(), full.end());
  }
}

char32_t compose(char32_t first, char32_t second) {
  if (first >= kLBase && first < kLBase + kLCount && second >= kVBase && second < kVBase + kVCount) {
    return kSBase + ((first - kLBase) * kVCount + (second - kVBase)) * kTCount;
  }
  if (first >= kSBase && first < kSBase + kSCount && (first - kSBase) % kTCount == 0 && second > kTBase && second < kTBase + kTCount) {
    return first + (second - kTBase);
  }
  return ud::compose_pair(first, second);
}

// Canonical ordering: stable sort of each run of non-starters by combining class.
void reorder(std::vector<char32_t>& cps) {
  std::size_t i = 0;
  while (i < cps.size()) {
    if (ud::canonical_combining_class(cps[i]) == 0) {
      ++i;
      continue;
    }
    std::size_t j = i;
    while (j < cps.size() && ud::canonical_combining_class(cps[j]) != 0) ++j;
    if (j - i > 1) {
      std::stable_sort(cps.begin() + static_cast<std::ptrdiff_t>(i), cps.begin() + static_cast<std::ptrdiff_t>(j),
                       [](char32_t a, char32_t b) { return ud::canonical_combining_class(a) < ud::canonical_combining_class(b); });
    }
    i = j;
  }
}

// Canonical composition (Unicode 3.11, D117) in place, following the Unicode sample code:
// a character joins the last starter unless a character in between has a combining class
// >= its own (or is itself a starter).
void compose_all(std::vector<char32_t>& cps) {
  if (cps.empty()) return;
  std::size_t starter = 0;
  // 256: a leading non-starter must not compose with anything that follows it.
  bool have_starter = ud::canonical_combining_class(cps[0]) == 0;
  int last_ccc = have_starter ? 0 : 256;
  std::size_t out = 1;
  for (std::size_t i = 1; i < cps.size(); ++i) {
    const char32_t c = cps[i];
    const int ccc = ud::canonical_combining_class(c);
    if (have_starter && (last_ccc < ccc || last_ccc == 0)) {
      if (const char32_t composite = compose(cps[starter], c)) {
        cps[starter] = composite;
        continue;
      }
    }
    if (ccc == 0) {
      starter = out;
      have_starter = true;
    }
    last_ccc = ccc;
    cps[out++] = c;
  }
  cps.resize(out);
}

}  // namespace

bool is_nfc_quick(std::string_view utf8) {
  const char* p = utf8.data();
  const char* end = p + utf8.size();
  uint8_t last_ccc = 0;
  while (p < end) {
    if (static_cast<unsigned char>(*p) < 0x80) {  // ASCII: starter, always NFC-stable
      ++p;
      last_ccc = 0;
      continue;
    }
    const char32_t cp = utf8::decode_valid(p);
    // Every character below U+0300 is NFC_QC=Yes with combining class 0.
    if (cp < 0x300) {
      last_ccc = 0;
      continue;
    }
    const uint8_t ccc = ud::canonical_combining_class(cp);
    if (ccc != 0 && last_ccc > ccc) return false;
    if (ud::nfc_quick_check(cp) != ud::NfcQuickCheck::Yes) return false;
    last_ccc = ccc;
  }
  return true;
}

std::string to_nfc(std::string_view utf8) {
  if (is_nfc_quick(utf8)) return std::string(utf8);
  std::vector<char32_t> cps;
  cps.reserve(utf8.size());
  const char* p = utf8.data();
  const char* end = p + utf8.size();
  while (p < end) decompose_into(utf8::decode_valid(p), cps);
  reorder(cps);
  compose_all(cps);
  std::string out;
  out.reserve(utf8.size() + 8);
  for (const char32_t cp : cps) utf8::append(out, cp);
  return out;
}

}  // namespace qwenrt::text
