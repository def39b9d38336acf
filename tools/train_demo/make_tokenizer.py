#!/usr/bin/env python3
"""Train the demo model's byte-level BPE tokenizer and tokenize the corpus into uint16 shards.

Usage (after make_data.py; CPU, a few minutes):

    python3 tools/train_demo/make_tokenizer.py [--work tools/train_demo/.work] [--data tools/train_demo/data]

Output:
  DATA/tokenizer/  tokenizer.json, tokenizer_config.json, chat_template.jinja  (Qwen 3.5 layout)
  DATA/train.npy.xz, DATA/val.npy.xz   uint16 token streams (.npy, xz-compressed: the call to the GPU
                                 machine carries at most 64 MiB); every document ends with <|endoftext|>
  DATA/val_docs.json             [source, start, end) of every validation document, for per-source scores
  DATA/meta.json                 vocabulary size, special ids, token counts, corpus manifest

DATA is what travels to the GPU machine (the device tool's `carry`), so it is kept small.

The tokenizer is built like Qwen 3.5's own: NFC normaliser, Split with Qwen 3.5's pre-tokenizer
regex (Isolated) then ByteLevel without its own regex, ByteLevel decoder, no BOS. The BPE part
holds VOCAB_SIZE - 33 entries (256 bytes first, then merges in rank order); the 33 added tokens
follow in Qwen 3.5's order (<|endoftext|> first), so the embedding has exactly VOCAB_SIZE rows.
Chat-formatted documents are left out of BPE training so no merge learns the control-token text.
"""

from __future__ import annotations

import argparse
import io
import json
import lzma
from pathlib import Path

import numpy as np
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

VOCAB_SIZE = 16384

# Qwen 3.5's pre-tokenizer pattern (shared/reference/tokenizer.md §1.4): Qwen2's plus \p{M}.
QWEN35_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}"
                  r"| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

# Qwen 3.5's added tokens in id order (248044...248076 there; VOCAB_SIZE-33... here). As in
# Qwen's files, the <|...|> control tokens are "special" (dropped by skip_special_tokens) and the
# tag-like ones (<think>, <tool_call>, ...) are not, so reasoning and tool parsers still see them.
ADDED_TOKENS = [
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>",
    "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>",
    "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>", "<tool_call>", "</tool_call>",
    "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>",
    "<tool_response>", "</tool_response>", "<think>", "</think>", "<|audio_start|>", "<|audio_end|>",
    "<tts_pad>", "<tts_text_bos>", "<tts_text_eod>", "<tts_text_bos_single>", "<|audio_pad|>",
]

CHAT_TEMPLATE = Path(__file__).resolve().parents[3] / "shared/tokenizers/qwen3.5/chat_template.jinja"


def is_special(token: str) -> bool:
    return token.startswith("<|")


def read_docs(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def build_tokenizer(train_docs: list[dict]) -> Tokenizer:
    tok = Tokenizer(models.BPE(unk_token=None, fuse_unk=False, byte_fallback=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN35_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
    ])
    tok.post_processor = processors.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    tok.decoder = decoders.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE - len(ADDED_TOKENS),
        min_frequency=2,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=[],
        show_progress=False,
    )
    texts = [d["text"] for d in train_docs if not d["chat"]]
    tok.train_from_iterator(texts, trainer=trainer, length=len(texts))
    assert tok.get_vocab_size() == VOCAB_SIZE - len(ADDED_TOKENS), tok.get_vocab_size()
    tok.add_tokens([AddedToken(t, special=is_special(t), normalized=False, single_word=False, lstrip=False, rstrip=False)
                    for t in ADDED_TOKENS])
    assert tok.token_to_id(ADDED_TOKENS[0]) == VOCAB_SIZE - len(ADDED_TOKENS)
    assert tok.get_vocab_size() == VOCAB_SIZE
    return tok


def tokenizer_config(tok: Tokenizer) -> dict:
    """tokenizer_config.json in the shape of Qwen 3.5's (transformers v5), chat template inline."""
    decoder = {str(tok.token_to_id(t)): {"content": t, "lstrip": False, "normalized": False, "rstrip": False,
                                         "single_word": False, "special": is_special(t)} for t in ADDED_TOKENS}
    return {
        "add_bos_token": False,
        "add_prefix_space": False,
        "added_tokens_decoder": decoder,
        "additional_special_tokens": ADDED_TOKENS[1:14],   # <|im_start|> ... <|video_pad|>, as Qwen lists them
        "bos_token": None,
        "chat_template": CHAT_TEMPLATE.read_text("utf-8"),
        "clean_up_tokenization_spaces": False,
        "eos_token": "<|im_end|>",
        "errors": "replace",
        "image_token": "<|image_pad|>",
        "model_max_length": 262144,
        "pad_token": "<|vision_pad|>",
        "pretokenize_regex": QWEN35_PATTERN,
        "split_special_tokens": False,
        "tokenizer_class": "TokenizersBackend",
        "unk_token": None,
        "video_token": "<|video_pad|>",
        "vision_bos_token": "<|vision_start|>",
        "vision_eos_token": "<|vision_end|>",
    }


def save_tokenizer(tok: Tokenizer, folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    tok.save(str(folder / "tokenizer.json"), pretty=False)
    (folder / "tokenizer_config.json").write_text(json.dumps(tokenizer_config(tok), indent=2, ensure_ascii=False) + "\n")
    (folder / "chat_template.jinja").write_text(CHAT_TEMPLATE.read_text("utf-8"))


def encode_stream(tok: Tokenizer, docs: list[dict]) -> tuple[np.ndarray, list[tuple[str, int, int]]]:
    """All documents as one uint16 stream, <|endoftext|> after each; plus each document's span."""
    eot = tok.token_to_id("<|endoftext|>")
    encodings = tok.encode_batch([d["text"] for d in docs], add_special_tokens=False)
    spans, pieces, pos = [], [], 0
    for d, enc in zip(docs, encodings):
        ids = enc.ids + [eot]
        spans.append((d["source"], pos, pos + len(ids)))
        pieces.append(np.asarray(ids, dtype=np.uint16))
        pos += len(ids)
    return np.concatenate(pieces), spans


def save_stream(path: Path, stream: np.ndarray) -> None:
    """A .npy file, xz-compressed (about 46% of the raw size for these streams)."""
    buf = io.BytesIO()
    np.save(buf, stream)
    path.write_bytes(lzma.compress(buf.getvalue(), preset=6))


def load_stream(path: Path) -> np.ndarray:
    return np.load(io.BytesIO(lzma.decompress(path.read_bytes())))


def main() -> None:
    here = Path(__file__).resolve().parent
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--work", type=Path, default=here / ".work")
    ap.add_argument("--data", type=Path, default=here / "data")
    args = ap.parse_args()
    assert VOCAB_SIZE <= 65536, "tokens are stored as uint16"

    train_docs = read_docs(args.work / "corpus/train.jsonl")
    val_docs = read_docs(args.work / "corpus/val.jsonl")
    tok = build_tokenizer(train_docs)
    save_tokenizer(tok, args.data / "tokenizer")
    # Reload from disk so the shards are made by exactly the saved file.
    tok = Tokenizer.from_file(str(args.data / "tokenizer/tokenizer.json"))

    meta = {"vocab_size": VOCAB_SIZE, "special_ids": {t: tok.token_to_id(t) for t in ADDED_TOKENS},
            "manifest": json.loads((args.work / "corpus/manifest.json").read_text())}
    for split, docs in (("train", train_docs), ("val", val_docs)):
        stream, spans = encode_stream(tok, docs)
        save_stream(args.data / f"{split}.npy.xz", stream)
        meta[f"{split}_tokens"] = int(stream.size)
        meta[f"{split}_chars"] = sum(len(d["text"]) for d in docs)
        if split == "val":
            (args.data / "val_docs.json").write_text(json.dumps(spans) + "\n")
        print(f"{split}: {len(docs)} documents, {stream.size / 1e6:.2f} M tokens, "
              f"{meta[f'{split}_chars'] / stream.size:.2f} characters per token")
    (args.data / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")


if __name__ == "__main__":
    main()
