#!/usr/bin/env python3
"""Does greedy decoding fall into short loops? (issue 30: not within 200 tokens)

Usage:
    python3 tools/train_demo/loop_check.py --model models/NAME --qwenrt BIN [--tokens 200] [--json OUT]

For each of samples.py's chat questions (thinking as the template defaults, and without), qwenrt
decodes greedily up to --tokens tokens (stopping at the generation config's stop tokens) and the
output is searched for a short loop: a period p <= MAX_PERIOD whose last REPEATS repetitions end
the output. Prints one line a question; exit status 1 when any output loops.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from transformers import AutoTokenizer

sys.path.insert(0, str(Path(__file__).resolve().parent))
from samples import CHATS  # noqa: E402

MAX_PERIOD = 16
REPEATS = 4


def loop_period(tokens: list[int]) -> int | None:
    """The smallest period p <= MAX_PERIOD such that the last REPEATS * p tokens repeat with period p."""
    for p in range(1, MAX_PERIOD + 1):
        tail = tokens[-REPEATS * p:]
        if len(tail) == REPEATS * p and all(tail[i] == tail[i % p] for i in range(len(tail))):
            return p
    return None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", type=Path, required=True)
    ap.add_argument("--qwenrt", type=Path, required=True)
    ap.add_argument("--tokens", type=int, default=200)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    tok = AutoTokenizer.from_pretrained(args.model)
    stops = json.loads((args.model / "generation_config.json").read_text())["eos_token_id"]
    results = []
    for question, think in CHATS:
        for thinking in sorted({think, not think}, reverse=True):
            prompt = tok.apply_chat_template([{"role": "user", "content": question}], tokenize=False,
                                             add_generation_prompt=True, enable_thinking=thinking)
            ids = tok(prompt)["input_ids"]
            res = subprocess.run([str(args.qwenrt), "generate", "--model", str(args.model), "--tokens", ",".join(map(str, ids)),
                                  "--max-tokens", str(args.tokens), "--temperature", "0", "--stop-ids", ",".join(map(str, stops)),
                                  "--json"], check=True, capture_output=True, text=True)
            out = json.loads(res.stdout.strip().splitlines()[-1])["tokens"]
            period = loop_period(out)
            text = tok.decode(out)
            results.append({"question": question, "thinking": thinking, "tokens": len(out), "loop_period": period,
                            "closes_think": "</think>" in text if thinking else None, "text": text})
            print(f"{'think' if thinking else 'plain':5s} {question!r}: {len(out)} tokens, "
                  f"{'LOOP of ' + str(period) if period else 'no short loop'}"
                  + (f", think block {'closed' if '</think>' in text else 'NOT closed'}" if thinking else ""))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    sys.exit(1 if any(r["loop_period"] for r in results) else 0)


if __name__ == "__main__":
    main()
