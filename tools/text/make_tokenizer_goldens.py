#!/usr/bin/env python3
"""Generate tokenizer goldens with Hugging Face `tokenizers` (the oracle) for the C++ tests.

Usage (from the repository root):
    /work/pyenv/bin/pip install -r tools/text/requirements.txt
    /work/pyenv/bin/python tools/text/make_tokenizer_goldens.py

Writes, deterministically (fixed seed; rerunning reproduces the files byte for byte):
  tests/data/tokenizer/qwen3/golden_multilingual.jsonl  {"text", "ids", "ids_no_special"}
  tests/data/tokenizer/qwen3/golden_decode.jsonl        {"ids", "text", "text_skip_special"}
  tests/data/tokenizer/pretokenize_goldens.jsonl        {"pattern", "text", "pieces"}
  tests/data/tokenizer/nfc_goldens.jsonl                {"text", "nfc"}
  tests/data/tokenizer/qwen3.5/golden_encode.jsonl      (only if that tokenizer is present)

"ids" is Tokenizer.encode(text).ids. "ids_no_special" is the same pipeline with added-token
matching off (normalizer -> pre_tokenizer -> model on the whole text), which is what the C++
encode(text, allow_special=false) promises. The corpus mixes scripts, combining marks, emoji
ZWJ sequences, code, whitespace runs, added tokens inside text, characters newer than various
Unicode versions, and long runs; see corpus().
"""
import json
import os
import random
import sys
import tarfile
import unicodedata

import unicodedata2
from tokenizers import Regex, Tokenizer, normalizers, pre_tokenizers

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))
DATA = os.path.join(ROOT, "tests", "data", "tokenizer")
SEED = 20260302

QWEN3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+"
                 r"[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN35_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?"
                  r"[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
GPT2_PATTERN = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"

HAND_WRITTEN = [
    "", " ", "\n", "a", "Hello world", " Hello world", "Hello   world  ", "x  y", "   x",
    "hello   ", "a\n\n\nb", "a\r\n\r\nb", "\t\tindent\n\t\t\tmore", "line\u2028sep\u2029par",
    "DON'T I'M it's WE'LL you'd they've she'S", "'s's's", "it'ſ OK'ſx", "'\u212ax",
    "12345 3.14159 -0.5e10 1,000,000", "½ ² Ⅻ ٣ ١٢٣ ०१२ ൧ 𝟘𝟙", "\U0001E4F0\U0001E4F1 \U00016D70",
    "中文字符，标点。日本語のテキスト、カタカナ。한국어 텍스트",
    "\u1100\u1161\u11a8 \u1100\u1161 \uac00\u11a8",  # Hangul jamo that NFC composes
    "مرحبا بالعالم، كَيْفَ حَالُكَ؟ ١٢٣",
    "नमस्ते दुनिया, क़िला ज़मीन \u0915\u093c",  # nukta forms (composition exclusions)
    "বাংলা ভাষা \u09fe", "ภาษาไทย สวัสดี", "שָׁלוֹם עוֹלָם", "Ελληνικά ά ά \u03b1\u0301\u0345",
    "Tiê\u0301ng Vie\u0323\u0302t", "cafe\u0301 café naïve na\u0308ive",
    "a\u0301\u0323 a\u0323\u0301 a\u0334\u0301 q\u0307\u0323",  # canonical reordering
    "\u0898x\u0301 a\u1ac1\u0301 a\u0301\u1df6",  # marks newer than HF's NFC data
    "\U00011938 \U00011935\U00011930",  # Dives Akuru: composition HF does not know
    "emoji 🙂🙂 ok!!\n", "👨‍👩‍👧‍👦 👍🏽 🇯🇵🇺🇸 1️⃣ ❤️ 🏳️‍🌈",
    "def f(x):\n    return x**2  # comment\n", "int main() { return 0; }\n",
    "{\"key\": [1, 2, {\"a\": null}], \"b\": \"\\u00e9\"}", "<div class=\"x\">&amp;</div>",
    "    ", "\n\n\n\n", " \n \n ", "a \t\n b", "\u00a0\u00a0x\u3000y\u2003z",
    "zero\u200bwidth\u200djoiner\ufeffbom", "soft\u00adhyphen", "\u180e mongolian vs",
    "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nHello",
    "<|im_end|>x", "<|im_start<|im_end|>|>", "<|im_start", "<|endoftext|><|endoftext|>",
    "text<tool_call>\n{\"name\": \"f\"}\n</tool_call>tail", "a<think>b</think>c",
    " <|im_end|> ", "<|vision_start|><|image_pad|><|vision_end|>",
    "\u1c89\u1c8a \U000105c0\U000105c1 \u0cf3 \U00011f00",  # Unicode 15/16 letters
    "\ue000\U000f0000 private \ufffe\uffff\U0010ffff nonchar \U000e0001\U000e0041",
    "\x00\x01\x07\x1b[31mred\x1b[0m\x7f", "a" * 300, " " * 257 + "x", "9" * 64,
    "ab" * 100 + "!", "\n" * 40 + "end", "🙂" * 50,
]

POOLS = {
    "ascii": list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789") +
             list(" .,;:!?'\"()[]{}<>-_=+*/\\|@#$%^&~`"),
    "space": [" ", "  ", "\t", "\n", "\r\n", "\r", "\u00a0", "\u3000", "\u2028", "\u0085",
              "\u000b", "\u000c", "\u2009", "\u200b", "\u180e", "\ufeff"],
    "cjk": list("的一是不了人我在有他这中大来上国个到说们为子和你地出道也时年得就那要下以生会"
                "あいうえおかきくけこアイウエオ漢字가나다라마바사아자차카타파하"),
    "arabic": list("ابتثجحخدذرسشصضطظعغفقكلمنهوي") + ["\u064e", "\u064f", "\u0650", "\u0651",
                                                   "\u0652", "\u0660", "\u0663", "\u06f5"],
    "indic": list("अआइईउऊकखगघचछजझटठडढतथदधनपफबभमयरलवशसह") +
             ["\u093e", "\u093f", "\u0940", "\u094d", "\u093c", "\u0902", "\u0966", "\u0969"],
    "marks": ["\u0300", "\u0301", "\u0302", "\u0303", "\u0308", "\u0323", "\u0327", "\u0334",
              "\u0345", "\u05b0", "\u05bc", "\u0e31", "\u0e48", "\u302a", "\u0898", "\u1ac1",
              "\u1df6", "\U0001e130", "\u20d2", "\u0f71", "\u0f72"],
    "latin_ext": list("àáâãäåæçèéêëìíîïñòóôõöøùúûüýþÿāăąćĉċčďđēĕėęěĝğġģĥħĩīĭįıĳĵķĸĺļľŀłńņňŉŋ"
                      "ŌōŎŏŐőŒœŕŗřśŝşšţťŧũūŭůűųŵŷźżžſǅǈǋǲẞß"),
    "emoji": ["🙂", "👍", "🏽", "\u200d", "👨", "👩", "👧", "❤", "\ufe0f", "🇯", "🇵", "⃣",
              "🏳", "🌈", "🤖", "🧑‍💻"],
    "symbols": list("€£¥₹©®™°±×÷→←↑↓∀∂∃∅∇∈∉∑∏√∞≈≠≤≥⌘⌥✓✗★☆♠♣♥♦"),
    "digits": list("0123456789") + ["½", "²", "Ⅻ", "١", "٣", "०", "৩", "๓", "𝟘", "\U0001e4f3"],
    "special": ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<think>", "</think>",
                "<tool_call>", "</tool_call>", "<|im_start", "|>", "<", "<|"],
    "words": ["the", " the", "The", "hello", " world", "tokenizer", " 's", "'re", "'LL", "I'm",
              "don't", "http://example.com/a?b=c", "foo_bar", "CamelCase", "snake_case",
              "    return", "\n\n", "...", "—", "–"],
}


def corpus():
    rng = random.Random(SEED)
    texts = list(HAND_WRITTEN)
    names = sorted(POOLS)
    for i in range(400):
        weights = [rng.random() ** 3 for _ in names]  # each text leans on a few pools
        length = rng.choice([3, 8, 20, 60, 150])
        parts = []
        for _ in range(length):
            pool = POOLS[rng.choices(names, weights)[0]]
            parts.append(rng.choice(pool))
        texts.append("".join(parts))
    for i in range(60):  # random code points from everywhere, assigned or not
        cps = []
        for _ in range(rng.choice([2, 5, 12])):
            cp = rng.choice([rng.randrange(0x20, 0x80), rng.randrange(0x80, 0x3000),
                             rng.randrange(0x3000, 0x10000), rng.randrange(0x10000, 0x30000),
                             rng.randrange(0xE0000, 0x110000)])
            if 0xD800 <= cp < 0xE000:
                cp = 0x20
            cps.append(chr(cp))
        texts.append("".join(cps))
    return texts


def write_jsonl(path, rows):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    print(f"wrote {len(rows)} rows to {os.path.relpath(path, ROOT)}")


def encode_without_added_tokens(tok, text):
    normalized = tok.normalizer.normalize_str(text) if tok.normalizer else text
    ids = []
    for piece, _ in tok.pre_tokenizer.pre_tokenize_str(normalized):
        ids += [t.id for t in tok.model.tokenize(piece)]
    return ids


def encode_goldens(tok, texts):
    rows = []
    for text in texts:
        ids = tok.encode(text, add_special_tokens=True).ids
        # Decoding gives back the normalized text (HF's own NFC, whose data is Unicode 9.0).
        assert tok.decode(ids, skip_special_tokens=False) == tok.normalizer.normalize_str(text)
        rows.append({"text": text, "ids": ids,
                     "ids_no_special": encode_without_added_tokens(tok, text)})
    return rows


def decode_goldens(tok):
    rng = random.Random(SEED + 1)
    vocab_size = tok.get_vocab_size(with_added_tokens=True)
    added = sorted(tok.get_added_tokens_decoder())
    rows = []
    for i in range(300):
        n = rng.choice([1, 2, 3, 5, 8])
        ids = []
        for _ in range(n):
            r = rng.random()
            if r < 0.15:
                ids.append(rng.choice(added))
            elif r < 0.5:
                ids.append(rng.randrange(128, 256))  # single high bytes: broken UTF-8
            else:
                ids.append(rng.randrange(0, min(vocab_size, added[0])))
        rows.append({"ids": ids, "text": tok.decode(ids, skip_special_tokens=False),
                     "text_skip_special": tok.decode(ids, skip_special_tokens=True)})
    return rows


def pretokenize_goldens(texts):
    rows = []
    for name, pattern in (("qwen3", QWEN3_PATTERN), ("qwen3.5", QWEN35_PATTERN),
                          ("gpt2", GPT2_PATTERN)):
        split = pre_tokenizers.Split(Regex(pattern), "isolated")
        for text in texts:
            rows.append({"pattern": name, "text": text,
                         "pieces": [p for p, _ in split.pre_tokenize_str(text)]})
    return rows


def nfc_goldens(texts):
    hf = normalizers.NFC()
    probes = list(texts)
    for cp in range(0x110000):
        if 0xD800 <= cp < 0xE000:
            continue
        ch = chr(cp)
        if unicodedata2.combining(ch) == 0 and unicodedata2.decomposition(ch) == "":
            continue
        probes += [unicodedata2.normalize("NFD", ch) + ch, "a" + ch + "\u0334", "a\u0301" + ch]
    for s in range(0xAC00, 0xD7A4, 97):  # Hangul syllables, decomposed
        probes.append(unicodedata2.normalize("NFD", chr(s)))
    return [{"text": p, "nfc": hf.normalize_str(p)} for p in probes]


def main():
    texts = corpus()
    # Committed xz-compressed (tests/data/tokenizer/README.md); Tokenizer.from_str takes its text.
    with tarfile.open(os.path.join(DATA, "qwen3", "tokenizer.json.tar.xz")) as archive:
        qwen3 = Tokenizer.from_str(archive.extractfile("tokenizer.json").read().decode("utf-8"))
    write_jsonl(os.path.join(DATA, "qwen3", "golden_multilingual.jsonl"), encode_goldens(qwen3, texts))
    write_jsonl(os.path.join(DATA, "qwen3", "golden_decode.jsonl"), decode_goldens(qwen3))
    write_jsonl(os.path.join(DATA, "pretokenize_goldens.jsonl"), pretokenize_goldens(texts))
    write_jsonl(os.path.join(DATA, "nfc_goldens.jsonl"), nfc_goldens(texts))


if __name__ == "__main__":
    sys.exit(main())
