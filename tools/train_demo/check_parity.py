#!/usr/bin/env python3
"""Check an exported demo model against transformers and qwenrt (CPU).

Usage:
    python3 tools/train_demo/check_parity.py --model models/qwen35-demo-16m --qwenrt build/release/qwenrt [--json OUT]

Checks, each printed with its number:
  1. stock transformers loads the folder as Qwen3_5ForCausalLM (only mtp.* left unused) and its
     tokenizer with AutoTokenizer; the chat template renders;
  2. the folder's MTP block loads into this directory's DemoModel, whose main logits equal stock
     transformers' bit for bit;
  3. qwenrt's logits for an English prompt against transformers in float64 (model.double()) and in
     float32: relative L2 error over all positions (target ~1e-6);
  4. qwenrt's greedy continuation decoded with the tokenizer, next to transformers' greedy tokens.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from transformers import AutoTokenizer, Qwen3_5ForCausalLM  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import qwen35_demo as demo  # noqa: E402

PROMPTS = [
    "The old man walked slowly to the river, and",
    # 163 tokens: three 64-token DeltaNet chunks in transformers' chunked form.
    "It was a bright cold day in early spring, and the fields beyond the village were still wet from the rain of "
    "the night before. The miller had opened his doors at dawn, as he always did, and the first carts were already "
    "waiting in the yard. Children ran along the road to the school house, calling to one another, while their "
    "fathers stood talking about the price of wheat and the state of the bridge. Nobody noticed the stranger who "
    "came over the hill, walking slowly, with a long staff in his hand and a bag upon his shoulder. He stopped at "
    "the well, drank, and looked for a long time at the church, as if he were trying to remember something he had "
    "lost many years ago. Then he turned to the old woman who sat by the gate and asked her",
]


def rel_l2(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.linalg.norm(a.astype(np.float64) - b) / np.linalg.norm(b))


def qwenrt_logits(binary: Path, model: Path, ids: list[int]) -> np.ndarray:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "logits.npy"
        subprocess.run([str(binary), "logits", "--model", str(model), "--tokens", ",".join(map(str, ids)),
                        "--out", str(out)], check=True)
        return np.load(out)


def qwenrt_generate(binary: Path, model: Path, ids: list[int], n: int) -> list[int]:
    res = subprocess.run([str(binary), "generate", "--model", str(model), "--tokens", ",".join(map(str, ids)),
                          "--max-tokens", str(n), "--json"], check=True, capture_output=True, text=True)
    return json.loads(res.stdout.strip().splitlines()[-1])["tokens"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", type=Path, required=True)
    ap.add_argument("--qwenrt", type=Path, required=True)
    ap.add_argument("--prompt", action="append", help="prompt to check (repeatable; default: PROMPTS)")
    ap.add_argument("--max-tokens", type=int, default=40)
    ap.add_argument("--json", type=Path, help="also write the numbers as JSON (model_card.py reads them)")
    args = ap.parse_args()

    # 1. Stock transformers: model and tokenizer.
    tok = AutoTokenizer.from_pretrained(args.model)
    hf = Qwen3_5ForCausalLM.from_pretrained(args.model, dtype=torch.float32).eval()
    chat = tok.apply_chat_template([{"role": "user", "content": "Hello"}], tokenize=False, add_generation_prompt=True)
    print(f"transformers: loaded {type(hf).__name__}, {sum(p.numel() for p in hf.parameters()):,} parameters; "
          f"chat prompt {chat!r}")
    ours = demo.load_folder(args.model)
    results = [check_prompt(prompt, tok, hf, ours, args) for prompt in args.prompt or PROMPTS]
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    worst = max(r["rel_l2_vs_f64"] for r in results)
    # float32 engines sit ~3e-7 from float64 on these models; 1e-5 is far outside rounding.
    if worst > 1e-5:
        raise SystemExit(f"parity FAILED: worst rel L2 vs float64 {worst:.3e}")


def check_prompt(prompt: str, tok, hf, ours, args) -> dict:
    ids = tok(prompt)["input_ids"]
    print(f"\nprompt {prompt[:60]!r}... -> {len(ids)} tokens")
    x = torch.tensor([ids])

    # 2. This directory's model (with MTP) against stock transformers.
    with torch.no_grad():
        hf32 = hf(x).logits[0].numpy()
        ours32 = ours.lm(x).logits[0].numpy()
    same = bool(np.array_equal(hf32, ours32))
    print(f"DemoModel main logits == stock transformers: {same}")

    # 3. qwenrt against transformers float64 and float32.
    with torch.no_grad():
        hf64 = hf.double()(x).logits[0].numpy()
    hf.float()
    q = qwenrt_logits(args.qwenrt, args.model, ids)
    print(f"qwenrt logits {q.shape}: rel L2 vs transformers float64 {rel_l2(q, hf64):.3e}, "
          f"vs float32 {rel_l2(q, hf32):.3e}; transformers f32 vs f64 {rel_l2(hf32, hf64):.3e}")
    print(f"argmax agree (qwenrt vs f64) {np.mean(q.argmax(-1) == hf64.argmax(-1)):.3f}")

    # 4. Greedy continuation: qwenrt and transformers.
    gen = qwenrt_generate(args.qwenrt, args.model, ids, args.max_tokens)
    with torch.no_grad():
        ref = hf.generate(x, max_new_tokens=args.max_tokens, do_sample=False)[0, len(ids):].tolist()
    n = min(len(gen), len(ref))
    print(f"qwenrt generate: {gen}")
    print(f"greedy tokens equal to transformers' for {sum(a == b for a, b in zip(gen[:n], ref[:n]))}/{n}")
    print(f"decoded continuation: {tok.decode(gen)!r}")
    return {"prompt": prompt, "tokens": len(ids), "demo_model_equals_transformers": same,
            "rel_l2_vs_f64": rel_l2(q, hf64), "rel_l2_vs_f32": rel_l2(q, hf32), "f32_vs_f64": rel_l2(hf32, hf64),
            "argmax_agree": float(np.mean(q.argmax(-1) == hf64.argmax(-1))),
            "greedy_equal": sum(a == b for a, b in zip(gen[:n], ref[:n])), "greedy_compared": n,
            "continuation": tok.decode(gen)}


if __name__ == "__main__":
    main()
