#!/usr/bin/env python3
"""Write a model folder's greedy_reference.json: greedy tokens of stock transformers in float64.

Usage:
    python3 tools/train_demo/greedy_reference.py --model models/NAME [--tokens 24]

tests/cli/demo_model_test.cpp runs `qwenrt generate` on every models/*/greedy_reference.json and
expects exactly these tokens. The file records the smallest top-1 minus top-2 logit margin over the
steps: float32 engines agree with float64 only where the margin exceeds their rounding, so the
first candidate prompt whose margin is at least MIN_MARGIN is used (the candidates and the choice
are fixed, so the file is reproducible).
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import torch  # noqa: E402
from transformers import AutoTokenizer, Qwen3_5ForCausalLM  # noqa: E402

MIN_MARGIN = 0.01
# A chat question in the template's default (thinking) form first, then plain-text prompts.
CANDIDATES = [("chat", 'What does "serendipity" mean?'), ("text", "The old man walked slowly to the river,"),
              ("chat", "What does Genesis 1:1 say?"), ("text", "Python is a programming language that")]


def greedy(model, ids: list[int], n: int) -> tuple[list[int], float]:
    out, margin = list(ids), float("inf")
    with torch.no_grad():
        for _ in range(n):
            logits = model(torch.tensor([out])).logits[0, -1]
            top = torch.topk(logits, 2)
            margin = min(margin, float(top.values[0] - top.values[1]))
            out.append(int(top.indices[0]))
    return out[len(ids):], margin


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", type=Path, required=True)
    ap.add_argument("--tokens", type=int, default=24)
    args = ap.parse_args()
    tok = AutoTokenizer.from_pretrained(args.model)
    model = Qwen3_5ForCausalLM.from_pretrained(args.model, dtype=torch.float64).eval()
    for kind, prompt in CANDIDATES:
        text = (tok.apply_chat_template([{"role": "user", "content": prompt}], tokenize=False, add_generation_prompt=True)
                if kind == "chat" else prompt)
        ids = tok(text)["input_ids"]
        tokens, margin = greedy(model, ids, args.tokens)
        print(f"{kind} {prompt!r}: min margin {margin:.4f}: {tok.decode(tokens)!r}")
        if margin >= MIN_MARGIN:
            break
    else:
        raise SystemExit(f"no candidate prompt keeps a top-1 margin of {MIN_MARGIN}; add one to CANDIDATES")
    ref = {"prompt_text": text, "prompt_ids": ids, "greedy_ids": tokens, "min_margin": round(margin, 6),
           "reference": "transformers float64, greedy (tools/train_demo/greedy_reference.py)"}
    (args.model / "greedy_reference.json").write_text(json.dumps(ref, indent=1) + "\n")


if __name__ == "__main__":
    main()
