#!/usr/bin/env python3
"""Does greedy decoding fall into short loops? (issue 30: not within 200 tokens)

Usage:
    python3 tools/train_demo/loop_check.py --model models/NAME --qwenrt BIN [--tokens 200] [--json OUT]
                                           [--questions FILE]

For each of samples.py's chat questions and its LOOP_QUESTIONS (questions no card shows, to judge
the model on more than its samples), with thinking and without, qwenrt decodes greedily up to
--tokens tokens (stopping at the generation config's stop tokens) and the output is searched for a
short loop (unlikelihood.loop_period: a period of at most 16 tokens repeated 4 times at the end).
--questions FILE (one question a line) judges those instead: questions kept aside while choosing
between runs, so the choice is not fitted to the ones above.
Prints one line a question and a count; exit status 1 when any output loops.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from transformers import AutoTokenizer

sys.path.insert(0, str(Path(__file__).resolve().parent))
from samples import CHATS, LOOP_QUESTIONS  # noqa: E402
from unlikelihood import loop_period  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", type=Path, required=True)
    ap.add_argument("--qwenrt", type=Path, required=True)
    ap.add_argument("--tokens", type=int, default=200)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--questions", type=Path, help="one question a line, instead of the samples' and LOOP_QUESTIONS")
    args = ap.parse_args()
    tok = AutoTokenizer.from_pretrained(args.model)
    stops = json.loads((args.model / "generation_config.json").read_text())["eos_token_id"]
    results = []
    if args.questions:
        questions = [q.strip() for q in args.questions.read_text(encoding="utf-8").splitlines() if q.strip()]
    else:
        questions = [q for q, _ in CHATS] + LOOP_QUESTIONS
    for question in questions:
        for thinking in (True, False):
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
    loops = sum(1 for r in results if r["loop_period"])
    print(f"{loops} of {len(results)} outputs end in a short loop")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    sys.exit(1 if loops else 0)


if __name__ == "__main__":
    main()
