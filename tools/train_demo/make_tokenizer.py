#!/usr/bin/env python3
"""Train the demo model's byte-level BPE tokenizer and tokenize the corpus into uint16 shards.

Usage (after make_data.py; CPU, a few minutes):

    python3 tools/train_demo/make_tokenizer.py [--work tools/train_demo/.work] [--data tools/train_demo/data]
                                               [--vocab-size 8192]

Output:
  DATA/tokenizer/  tokenizer.json, tokenizer_config.json, chat_template.jinja  (Qwen 3.5 layout)
  DATA/{train,val,test}.npy.xz   uint16 token streams (.npy, xz-compressed: the call to the GPU
                                 machine carries at most 64 MiB); every document ends with <|endoftext|>
  DATA/{train,val,test}.roles.npy.xz   uint8 per token: ROLE_TEXT (plain text), ROLE_PROMPT (chat
                                 template, system, user and tool turns) or ROLE_REPLY (an assistant
                                 turn's content after `<|im_start|>assistant\n`, its <|im_end|> included);
                                 train.py weights the loss by the role of the token predicted
  DATA/{val,test}_docs.json      [source, start, end) of every held-out document, for per-source scores
  DATA/meta.json                 vocabulary size, special ids, token counts, corpus manifest

DATA is what travels to the GPU machine (the device tool's `carry`), so it is kept small.

The tokenizer is built like Qwen 3.5's own: NFC normaliser, Split with Qwen 3.5's pre-tokenizer
regex (Isolated) then ByteLevel without its own regex, ByteLevel decoder, no BOS. The BPE part
holds VOCAB_SIZE - 33 entries (256 bytes first, then merges in rank order); the 33 added tokens
follow in Qwen 3.5's order (<|endoftext|> first), so the embedding has exactly VOCAB_SIZE rows.
Chat documents take part in BPE training with the added tokens' text cut out, so merges learn
the conversations' words but no merge learns the control-token text. After saving, a sample of
the conversations is rendered again with transformers' apply_chat_template on the saved
tokenizer and must equal the corpus text (chat_render.py's Jinja set-up against transformers').
"""

from __future__ import annotations

import argparse
import io
import json
import lzma
import re
from pathlib import Path

import numpy as np
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

VOCAB_SIZE = 8192   # see README.md ("Shape") for why not 16,384
ROLE_TEXT, ROLE_PROMPT, ROLE_REPLY = 0, 1, 2

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



def is_special(token: str) -> bool:
    return token.startswith("<|")


def read_docs(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def build_tokenizer(train_docs: list[dict], vocab_size: int) -> Tokenizer:
    tok = Tokenizer(models.BPE(unk_token=None, fuse_unk=False, byte_fallback=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN35_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
    ])
    tok.post_processor = processors.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    tok.decoder = decoders.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size - len(ADDED_TOKENS),
        min_frequency=2,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=[],
        show_progress=False,
    )
    control = re.compile("|".join(re.escape(t) for t in ADDED_TOKENS))
    texts = [control.sub("\n", d["text"]) if d["chat"] else d["text"] for d in train_docs]
    tok.train_from_iterator(texts, trainer=trainer, length=len(texts))
    assert tok.get_vocab_size() == vocab_size - len(ADDED_TOKENS), tok.get_vocab_size()
    tok.add_tokens([AddedToken(t, special=is_special(t), normalized=False, single_word=False, lstrip=False, rstrip=False)
                    for t in ADDED_TOKENS])
    assert tok.token_to_id(ADDED_TOKENS[0]) == vocab_size - len(ADDED_TOKENS)
    assert tok.get_vocab_size() == vocab_size
    return tok


def tokenizer_config(tok: Tokenizer, template: str) -> dict:
    """tokenizer_config.json in the shape of Qwen 3.5's (transformers v5), chat template inline."""
    decoder = {str(tok.token_to_id(t)): {"content": t, "lstrip": False, "normalized": False, "rstrip": False,
                                         "single_word": False, "special": is_special(t)} for t in ADDED_TOKENS}
    return {
        "add_bos_token": False,
        "add_prefix_space": False,
        "added_tokens_decoder": decoder,
        "additional_special_tokens": ADDED_TOKENS[1:14],   # <|im_start|> ... <|video_pad|>, as Qwen lists them
        "bos_token": None,
        "chat_template": template,
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


def save_tokenizer(tok: Tokenizer, folder: Path, template: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    tok.save(str(folder / "tokenizer.json"), pretty=False)
    (folder / "tokenizer_config.json").write_text(json.dumps(tokenizer_config(tok, template), indent=2, ensure_ascii=False) + "\n")
    (folder / "chat_template.jinja").write_text(template)


REPLY = re.compile(r"<\|im_start\|>assistant\n(.*?<\|im_end\|>)", re.S)


def reply_spans(text: str) -> list[tuple[int, int]]:
    """Character spans of the assistant turns' content (after the role line, <|im_end|> included)."""
    return [m.span(1) for m in REPLY.finditer(text)]


def encode_stream(tok: Tokenizer, docs: list[dict]) -> tuple[np.ndarray, np.ndarray, list[tuple[str, int, int]]]:
    """All documents as one uint16 stream, <|endoftext|> after each; the uint8 role of every token;
    and each document's span."""
    eot = tok.token_to_id("<|endoftext|>")
    encodings = tok.encode_batch([d["text"] for d in docs], add_special_tokens=False)
    spans, pieces, roles, pos = [], [], [], 0
    for d, enc in zip(docs, encodings):
        ids = enc.ids + [eot]
        role = np.full(len(ids), ROLE_PROMPT if d["chat"] else ROLE_TEXT, dtype=np.uint8)
        if d["chat"]:
            starts = np.array([a for a, _ in enc.offsets])
            for a, b in reply_spans(d["text"]):
                role[:-1][(starts >= a) & (starts < b)] = ROLE_REPLY
            role[-1] = ROLE_REPLY   # <|endoftext|> follows the last <|im_end|>
        spans.append((d["source"], pos, pos + len(ids)))
        pieces.append(np.asarray(ids, dtype=np.uint16))
        roles.append(role)
        pos += len(ids)
    return np.concatenate(pieces), np.concatenate(roles), spans


def check_rendering(folder: Path, docs: list[dict], n: int = 300) -> int:
    """Render the first n conversations again with transformers' apply_chat_template on the saved
    tokenizer; stop on any difference from the corpus text. Returns the number checked."""
    from transformers import AutoTokenizer
    hf = AutoTokenizer.from_pretrained(folder)
    checked = 0
    for d in docs:
        if not d["chat"] or checked == n:
            continue
        again = hf.apply_chat_template(d["messages"], tools=d.get("tools"), tokenize=False)
        if again != d["text"]:
            raise SystemExit(f"transformers renders a {d['source']} conversation differently:\n{again!r}\nvs\n{d['text']!r}")
        checked += 1
    return checked


def save_stream(path: Path, stream: np.ndarray) -> None:
    """A .npy file, xz-compressed (about 46% of the raw size for these streams)."""
    buf = io.BytesIO()
    np.save(buf, stream)
    path.write_bytes(lzma.compress(buf.getvalue(), preset=6))


def load_stream(path: Path) -> np.ndarray:
    return np.load(io.BytesIO(lzma.decompress(path.read_bytes())))


def main() -> None:
    import chat_render

    here = Path(__file__).resolve().parent
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--work", type=Path, default=here / ".work")
    ap.add_argument("--data", type=Path, default=here / "data")
    ap.add_argument("--vocab-size", type=int, default=VOCAB_SIZE)
    ap.add_argument("--template", type=Path, help="Qwen 3.5's chat_template.jinja (default: shared/ above this folder)")
    ap.add_argument("--tokenizer", type=Path, help="encode with this folder's tokenizer.json (a shipped model's) instead of "
                                                   "training one: the streams for a continued run of that model")
    args = ap.parse_args()
    if not len(ADDED_TOKENS) + 256 < args.vocab_size <= 65536:
        ap.error("--vocab-size: more than the 256 bytes and 33 added tokens, at most 65,536 (tokens are stored as uint16)")
    template = (args.template or chat_render.find_template()).read_text("utf-8")

    docs = {split: read_docs(args.work / f"corpus/{split}.jsonl") for split in ("train", "val", "test")}
    if args.tokenizer:
        tok = Tokenizer.from_file(str(args.tokenizer / "tokenizer.json"))
        if tok.get_vocab_size() != args.vocab_size:
            ap.error(f"--tokenizer: {tok.get_vocab_size()} tokens, but --vocab-size is {args.vocab_size}")
    else:
        tok = build_tokenizer(docs["train"], args.vocab_size)
    save_tokenizer(tok, args.data / "tokenizer", template)
    # Reload from disk so the shards are made by exactly the saved file.
    tok = Tokenizer.from_file(str(args.data / "tokenizer/tokenizer.json"))
    checked = check_rendering(args.data / "tokenizer", docs["val"])
    print(f"transformers' apply_chat_template renders {checked} conversations exactly as the corpus has them")

    meta = {"vocab_size": args.vocab_size, "special_ids": {t: tok.token_to_id(t) for t in ADDED_TOKENS},
            "roles": {"text": ROLE_TEXT, "prompt": ROLE_PROMPT, "reply": ROLE_REPLY},
            "manifest": json.loads((args.work / "corpus/manifest.json").read_text())}
    for split, split_docs in docs.items():
        stream, roles, spans = encode_stream(tok, split_docs)
        save_stream(args.data / f"{split}.npy.xz", stream)
        save_stream(args.data / f"{split}.roles.npy.xz", roles)
        meta[f"{split}_tokens"] = int(stream.size)
        meta[f"{split}_chars"] = sum(len(d["text"]) for d in split_docs)
        meta[f"{split}_reply_tokens"] = int((roles == ROLE_REPLY).sum())
        if split != "train":
            (args.data / f"{split}_docs.json").write_text(json.dumps(spans) + "\n")
        print(f"{split}: {len(split_docs)} documents, {stream.size / 1e6:.2f} M tokens "
              f"({100 * (roles == ROLE_REPLY).mean():.0f}% assistant replies, {100 * (roles == ROLE_PROMPT).mean():.0f}% chat prompts), "
              f"{meta[f'{split}_chars'] / stream.size:.2f} characters per token")
    (args.data / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")
    total = sum(f.stat().st_size for f in args.data.rglob("*") if f.is_file())
    print(f"{args.data}: {total / 1e6:.1f} MB (carried to the GPU machine; check_carry.py adds up the whole call)")


if __name__ == "__main__":
    main()
