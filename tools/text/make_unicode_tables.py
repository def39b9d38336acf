#!/usr/bin/env python3
"""Generate src/text/unicode/unicode_data.cpp: the Unicode tables the tokenizer needs.

Usage (from the repository root):
    /work/pyenv/bin/pip install -r tools/text/requirements.txt
    /work/pyenv/bin/python tools/text/make_unicode_tables.py            # writes the .cpp
    /work/pyenv/bin/python tools/text/make_unicode_tables.py --check    # fails if it is stale

Why two Unicode versions: the engine must split and normalise exactly like Hugging Face
`tokenizers` (the oracle the Qwen models were tokenized with), and that library itself mixes
versions:
  * its regex engine (Oniguruma, bundled by the `onig` crate) classifies code points with
    Unicode 16.0 data -> general categories come from `unicodedata2==16.0.0`;
  * its NFC normalizer (`unicode-normalization-alignments` 0.1.12) carries Unicode 9.0 data.
    Canonical decompositions and combining classes of assigned characters never change
    (Unicode stability policy), so "9.0 data" = the 16.0 data restricted to characters HF's
    normalizer knows. That set is found by probing HF's NFC on every character that has a
    combining class or a decomposition in 16.0; the probe result is asserted below to be
    exactly the 141 post-9.0 characters, so a `tokenizers` upgrade that changes it fails loudly.
Case folding (only used for literals inside (?i:...) groups) comes from Python's own
str.casefold (Unicode 14.0 in Python 3.11); only simple one-to-one folds are kept.
"""
import argparse
import os
import sys
import unicodedata as py_unicodedata

import unicodedata2 as ud
from tokenizers import normalizers

EXPECTED_CATEGORY_VERSION = "16.0.0"
EXPECTED_HF_UNKNOWN_NORMALIZATION_CHARS = 141
OUT_PATH = os.path.join(os.path.dirname(__file__), "..", "..", "src", "text", "unicode", "unicode_data.cpp")

# Order must match enum class GeneralCategory in src/text/unicode/unicode_data.h.
CATEGORIES = ["Cn", "Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Me", "Nd", "Nl", "No", "Pc", "Pd",
              "Ps", "Pe", "Pi", "Pf", "Po", "Sm", "Sc", "Sk", "So", "Zs", "Zl", "Zp", "Cc", "Cf",
              "Cs", "Co"]
MAX_CP = 0x110000
BLOCK = 128  # two-stage tables: stage 1 indexed by cp / BLOCK, stage 2 holds deduplicated blocks
HANGUL_S_BASE, HANGUL_S_COUNT = 0xAC00, 11172
NFC_QC_YES, NFC_QC_MAYBE, NFC_QC_NO = 0, 1, 2


def all_code_points():
    return (cp for cp in range(MAX_CP) if not 0xD800 <= cp < 0xE000)


def is_hangul_syllable(cp):
    return HANGUL_S_BASE <= cp < HANGUL_S_BASE + HANGUL_S_COUNT


def chars_unknown_to_hf_nfc():
    """Characters with normalization data in 16.0 that HF's NFC treats as plain starters."""
    hf = normalizers.NFC()
    unknown = set()
    for cp in all_code_points():
        ch = chr(cp)
        if ud.combining(ch) == 0 and ud.decomposition(ch) == "":
            continue
        # The probes expose a combining class (reordering against ccc 1 and 230 marks, blocking
        # of a ccc 220 mark) and decomposition/composition knowledge.
        probes = [ch, ud.normalize("NFD", ch), "a" + ch + "\u0334", "a\u0301" + ch,
                  ch + "\u0301", "a" + ch + "\u0323", "a\u0323" + ch]
        if any(hf.normalize_str(p) != ud.normalize("NFC", p) for p in probes):
            unknown.add(cp)
    return unknown


def normalization_tables(unknown):
    ccc = [0] * MAX_CP
    decomposition = {}   # cp -> full canonical decomposition (tuple of cps)
    compositions = {}    # (first, second) -> primary composite
    for cp in all_code_points():
        if cp in unknown or is_hangul_syllable(cp):
            continue  # Hangul is algorithmic in the C++ code
        ch = chr(cp)
        ccc[cp] = ud.combining(ch)
        raw = ud.decomposition(ch)
        if raw == "" or raw.startswith("<"):
            continue  # no canonical decomposition (compatibility ones start with <tag>)
        decomposition[cp] = tuple(ord(c) for c in ud.normalize("NFD", ch))
        parts = [int(x, 16) for x in raw.split()]
        if len(parts) == 2 and ud.normalize("NFC", chr(parts[0]) + chr(parts[1])) == ch:
            compositions[(parts[0], parts[1])] = cp
    for cp, full in decomposition.items():
        assert not (set(full) & unknown), f"U+{cp:04X} decomposes into a character HF lacks"
    qc = [NFC_QC_YES] * MAX_CP
    for cp in decomposition:
        if ud.normalize("NFC", chr(cp)) != chr(cp):
            qc[cp] = NFC_QC_NO  # singletons, composition exclusions, non-starter decompositions
    for (_, second) in compositions:
        qc[second] = NFC_QC_MAYBE
    for cp in list(range(0x1161, 0x1176)) + list(range(0x11A8, 0x11C3)):
        qc[cp] = NFC_QC_MAYBE  # Hangul V and T jamo compose with a preceding L / LV
    return ccc, decomposition, compositions, qc


def simple_case_folds():
    folds = {}
    for cp in all_code_points():
        ch = chr(cp)
        folded = ch.casefold()
        if len(folded) != 1:
            folded = ch.lower() if len(ch.lower()) == 1 else ch
        if folded != ch:
            folds[cp] = ord(folded)
    return folds


def two_stage(name, values, ctype):
    blocks, index = {}, []
    for start in range(0, MAX_CP, BLOCK):
        block = tuple(values[start:start + BLOCK])
        index.append(blocks.setdefault(block, len(blocks)))
    assert len(blocks) < 65536
    out = [f"const uint16_t {name}_stage1[{len(index)}] = {{"]
    out += wrap(index)
    out.append("};")
    out.append(f"const {ctype} {name}_stage2[{len(blocks) * BLOCK}] = {{")
    for block in sorted(blocks, key=blocks.get):
        out += wrap(block)
    out.append("};")
    return out, len(index) * 2 + len(blocks) * BLOCK


def wrap(numbers, per_line=24):
    items = [str(n) for n in numbers]
    return [" " + ",".join(items[i:i + per_line]) + "," for i in range(0, len(items), per_line)]


def generate():
    if ud.unidata_version != EXPECTED_CATEGORY_VERSION:
        sys.exit(f"unicodedata2 has Unicode {ud.unidata_version}; pin {EXPECTED_CATEGORY_VERSION}")
    unknown = chars_unknown_to_hf_nfc()
    if len(unknown) != EXPECTED_HF_UNKNOWN_NORMALIZATION_CHARS:
        sys.exit(f"HF NFC lacks {len(unknown)} characters, expected "
                 f"{EXPECTED_HF_UNKNOWN_NORMALIZATION_CHARS}: tokenizers changed its normalizer")
    categories = [0] * MAX_CP
    for cp in all_code_points():
        categories[cp] = CATEGORIES.index(ud.category(chr(cp)))
    for cp in range(0xD800, 0xE000):
        categories[cp] = CATEGORIES.index("Cs")
    ccc, decomposition, compositions, qc = normalization_tables(unknown)
    folds = simple_case_folds()

    lines = [
        "// GENERATED by tools/text/make_unicode_tables.py -- do not edit by hand.",
        f"// General categories: Unicode {ud.unidata_version} (unicodedata2), as HF tokenizers' regex.",
        "// Normalization: Unicode 16.0 data restricted to what HF tokenizers' NFC knows (Unicode 9.0);",
        f"// {len(unknown)} newer combining/decomposable characters are treated as plain starters.",
        f"// Case folds: Python {py_unicodedata.unidata_version} str.casefold, one-to-one folds only.",
        "#include \"text/unicode/unicode_data.h\"",
        "",
        "#include <algorithm>",
        "#include <cstdint>",
        "",
        "namespace qwenrt::text::unicode_data {",
        "namespace {",
        "",
        f"constexpr uint32_t kBlock = {BLOCK};",
    ]
    sizes = {}
    for name, values in (("category", categories), ("ccc", ccc), ("nfc_qc", qc)):
        table, sizes[name] = two_stage(name, values, "uint8_t")
        lines += table
    decomp_items = sorted(decomposition.items())
    pool = []
    lines.append(f"// (code point, offset into kDecompositionPool, length), sorted by code point")
    lines.append(f"const uint32_t kDecompositions[{len(decomp_items)}][3] = {{")
    for cp, full in decomp_items:
        lines.append(f" {{{cp},{len(pool)},{len(full)}}},")
        pool += full
    lines.append("};")
    lines.append(f"const char32_t kDecompositionPool[{len(pool)}] = {{")
    lines += wrap(pool, 16)
    lines.append("};")
    comp_items = sorted(((a << 21) | b, c) for (a, b), c in compositions.items())
    lines.append("// ((first << 21) | second, composite), sorted by key")
    lines.append(f"const uint64_t kCompositions[{len(comp_items)}][2] = {{")
    lines += [f" {{{k},{c}}}," for k, c in comp_items]
    lines.append("};")
    fold_items = sorted(folds.items())
    lines.append(f"const uint32_t kCaseFolds[{len(fold_items)}][2] = {{")
    lines += [f" {{{a},{b}}}," for a, b in fold_items]
    lines.append("};")
    lines += [
        "",
        "template <typename T, size_t N1, size_t N2>",
        "T lookup(const uint16_t (&stage1)[N1], const T (&stage2)[N2], char32_t cp) {",
        "  if (cp >= 0x110000) return T{0};",
        "  return stage2[static_cast<uint32_t>(stage1[cp / kBlock]) * kBlock + cp % kBlock];",
        "}",
        "",
        "}  // namespace",
        "",
        f"const char* const kCategoryUnicodeVersion = \"{ud.unidata_version}\";",
        "const char* const kNormalizationUnicodeVersion = \"9.0 (as Hugging Face tokenizers' NFC)\";",
        "",
        "GeneralCategory general_category(char32_t cp) {",
        "  return static_cast<GeneralCategory>(lookup(category_stage1, category_stage2, cp));",
        "}",
        "",
        "uint8_t canonical_combining_class(char32_t cp) { return lookup(ccc_stage1, ccc_stage2, cp); }",
        "",
        "NfcQuickCheck nfc_quick_check(char32_t cp) {",
        "  return static_cast<NfcQuickCheck>(lookup(nfc_qc_stage1, nfc_qc_stage2, cp));",
        "}",
        "",
        "std::span<const char32_t> canonical_decomposition(char32_t cp) {",
        "  const auto* end = kDecompositions + std::size(kDecompositions);",
        "  const auto* it = std::lower_bound(kDecompositions, end, static_cast<uint32_t>(cp),",
        "      [](const uint32_t (&row)[3], uint32_t key) { return row[0] < key; });",
        "  if (it == end || (*it)[0] != cp) return {};",
        "  return {kDecompositionPool + (*it)[1], (*it)[2]};",
        "}",
        "",
        "char32_t compose_pair(char32_t first, char32_t second) {",
        "  const uint64_t key = (static_cast<uint64_t>(first) << 21) | second;",
        "  const auto* end = kCompositions + std::size(kCompositions);",
        "  const auto* it = std::lower_bound(kCompositions, end, key,",
        "      [](const uint64_t (&row)[2], uint64_t k) { return row[0] < k; });",
        "  if (it == end || (*it)[0] != key) return 0;",
        "  return static_cast<char32_t>((*it)[1]);",
        "}",
        "",
        "char32_t simple_case_fold(char32_t cp) {",
        "  const auto* end = kCaseFolds + std::size(kCaseFolds);",
        "  const auto* it = std::lower_bound(kCaseFolds, end, static_cast<uint32_t>(cp),",
        "      [](const uint32_t (&row)[2], uint32_t key) { return row[0] < key; });",
        "  if (it == end || (*it)[0] != cp) return cp;",
        "  return (*it)[1];",
        "}",
        "",
        "}  // namespace qwenrt::text::unicode_data",
        "",
    ]
    print(f"tables: {sizes}, decompositions {len(decomp_items)}, pool {len(pool)}, "
          f"compositions {len(comp_items)}, case folds {len(fold_items)}", file=sys.stderr)
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if the committed file differs")
    args = parser.parse_args()
    text = generate()
    path = os.path.normpath(OUT_PATH)
    if args.check:
        with open(path, encoding="utf-8") as f:
            if f.read() != text:
                sys.exit(f"{path} is stale; rerun tools/text/make_unicode_tables.py")
        print("up to date")
        return
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
