#!/usr/bin/env python3
"""Print the model card's samples: greedy continuations from qwenrt and seeded samples from
transformers (the generation_config.json settings), for plain prompts and chat prompts.

Usage:
    python3 tools/train_demo/samples.py --model models/qwen35-demo-16m --qwenrt build/release/qwenrt

Output is Markdown, pasted unedited into the model card.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
from pathlib import Path

os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import torch  # noqa: E402
from transformers import AutoTokenizer, Qwen3_5ForCausalLM  # noqa: E402

PROMPTS = [
    "The old man walked slowly to the river, and",
    "Python is a programming language that",
]
# (question, enable_thinking): the template's default (thinking) and the no-thinking form.
CHATS = [
    ('What does "serendipity" mean?', True),
    ("Tell me about the river Jordan.", True),
    ("What does the Python function os.path.join() do?", True),
    ("What does the SQLite function abs(X) do?", False),
    ("What does John 3:16 say?", False),
    ("Hello, who are you?", True),
]
# Questions no card shows: loop_check.py judges greedy decoding on these too (issue 30: no short
# loops within 200 tokens on unseen questions, not just on the card's).
LOOP_QUESTIONS = [
    'What does "ephemeral" mean?',
    'What does the word "ubiquitous" mean?',
    'Define "melancholy".',
    'What is a "kludge"?',
    'What does "hacker" mean in the Jargon File?',
    'What does Genesis 1:1 say?',
    'What does Psalm 23:1 say?',
    'Who was Moses?',
    'Tell me about King David.',
    'What does the Python function len() do?',
    'What does str.split() do in Python?',
    'How do I read a file in Python?',
    'What does the SQLite function length(X) do?',
    'What is a SQLite index?',
    'How do I create a table in SQLite?',
    'What is the capital of France?',
    'Write a short poem about the sea.',
    'What is love?',
    'Explain recursion.',
    'What does the Devil\'s Dictionary say about "lawyer"?',
    'What does "cynic" mean?',
    'Tell me about Jerusalem.',
    'What does Romans 8:28 say?',
    'What does the Python module itertools provide?',
    'What does "abandon" mean?',
    'Tell me about the apostle Paul.',
    'What is the meaning of "grace"?',
    'How are you today?',
    'What does the SQLite function substr() do?',
    'What does list.append() do?',
]
SEED = 0


def qwenrt_greedy(binary: Path, model: Path, ids: list[int], n: int, stops: list[int]) -> list[int]:
    res = subprocess.run([str(binary), "generate", "--model", str(model), "--tokens", ",".join(map(str, ids)),
                          "--max-tokens", str(n), "--stop-ids", ",".join(map(str, stops)), "--json"],
                         check=True, capture_output=True, text=True)
    return json.loads(res.stdout.strip().splitlines()[-1])["tokens"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", type=Path, required=True)
    ap.add_argument("--qwenrt", type=Path, required=True)
    ap.add_argument("--max-tokens", type=int, default=120)
    args = ap.parse_args()

    tok = AutoTokenizer.from_pretrained(args.model)
    hf = Qwen3_5ForCausalLM.from_pretrained(args.model, dtype=torch.float32).eval()
    stops = list(hf.generation_config.eos_token_id)

    def show(title: str, prompt: str, ids: list[int], out: list[int]) -> None:
        if out and out[-1] in stops:
            out = out[:-1]   # generation ended on a stop token, which is not text
        print(f"**{title}** — prompt `{prompt!r}`\n\n```text\n{prompt}{tok.decode(out)}\n```\n")

    # Thinking prompts end in "<think>\n" (the template's default); enable_thinking=False puts
    # "<think>\n\n</think>\n\n" into the generation prompt.
    chat_prompts = [tok.apply_chat_template([{"role": "user", "content": c}], tokenize=False, add_generation_prompt=True,
                                            enable_thinking=think) for c, think in CHATS]
    for prompt in PROMPTS + chat_prompts:
        ids = tok(prompt)["input_ids"]
        show("qwenrt, greedy", prompt, ids, qwenrt_greedy(args.qwenrt, args.model, ids, args.max_tokens, stops))
        torch.manual_seed(SEED)
        with torch.no_grad():
            out = hf.generate(torch.tensor([ids]), max_new_tokens=args.max_tokens)[0, len(ids):].tolist()
        cfg = hf.generation_config
        show(f"transformers, sampled (temperature {cfg.temperature}, top-k {cfg.top_k}, top-p {cfg.top_p}, "
             f"seed {SEED})", prompt, ids, out)


if __name__ == "__main__":
    main()
