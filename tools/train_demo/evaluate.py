#!/usr/bin/env python3
"""Score model folders on the held-back test documents, each with its own tokenizer (CPU, float32).

Usage:
    python3 tools/train_demo/evaluate.py --model models/NEW --model models/qwen35-demo-16m \
        [--corpus tools/train_demo/.work/corpus/test.jsonl] [--max-tokens N] [--out eval.json]

For every folder: the test documents (make_data.py's `test` split, never seen in training nor used
for early stopping) are tokenized with the folder's tokenizer.json, laid out as in training
(<|endoftext|> after each document, roles from make_tokenizer.py) and scored in 1,024-token windows
with the weights exactly as stored: perplexity over every token and over assistant replies, bits
per UTF-8 byte (the number that compares models with different tokenizers), and the MTP head's
teacher-forced acceptance (its top token for t+2 equals the main head's top token at t+1).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import torch  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import qwen35_demo as demo  # noqa: E402
import train  # noqa: E402
from make_tokenizer import ROLE_PROMPT, ROLE_REPLY, encode_stream, read_docs  # noqa: E402


def score(folder: Path, docs: list[dict], max_tokens: int | None, seq_len: int = train.SEQ_LEN, batch: int = 4) -> dict:
    tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
    stream, roles, spans = encode_stream(tok, docs)
    if max_tokens:
        stream, roles = stream[:max_tokens], roles[:max_tokens]
    sources = sorted({s for s, _, _ in spans})
    token_source = torch.zeros(len(stream), dtype=torch.long)
    for s, a, b in spans:
        token_source[a:min(b, len(stream))] = sources.index(s)
    token_bytes = torch.tensor([len(tok.id_to_token(i) or "") for i in range(tok.get_vocab_size())], dtype=torch.long)
    split = train.Split(torch.from_numpy(stream.astype("int64")), torch.from_numpy(roles.astype("int64")),
                        token_source, sources, token_bytes)
    model = demo.load_folder(folder)
    torch.manual_seed(0)
    with torch.no_grad():
        result = train.evaluate(model, split, min(seq_len, len(stream) - 2), batch, ROLE_REPLY, ROLE_PROMPT, bf16=False)
    result["model"] = str(folder)
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", type=Path, action="append", required=True, help="model folder (repeatable)")
    ap.add_argument("--corpus", type=Path, default=HERE / ".work/corpus/test.jsonl")
    ap.add_argument("--max-tokens", type=int, help="score only the first N tokens of each model's stream")
    ap.add_argument("--out", type=Path, help="write the results as JSON")
    args = ap.parse_args()
    docs = read_docs(args.corpus)
    results = []
    for folder in args.model:
        r = score(folder, docs, args.max_tokens)
        print(f"{folder}: ppl {r['ppl']:.2f} ({r['tokens']} tokens), {r['bits_per_byte']:.4f} bits/byte, "
              f"reply ppl {r['reply_ppl'] or float('nan'):.2f}, MTP accept {100 * r['mtp_accept']:.1f}% "
              f"(replies {100 * (r['mtp_accept_reply'] or float('nan')):.1f}%)", flush=True)
        results.append(r)
    if args.out:
        args.out.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
