#!/usr/bin/env python3
"""mlx-lm's perplexity on exactly the tokens and windows `qwenrt perplexity` scores.

    qwenrt tokenize --model DIR < text.txt > ids.json
    python3 bench/perplexity_mlx.py --model DIR --tokens ids.json --ctx 512 [--float32]

The token stream is cut into consecutive windows of --ctx tokens, each run from an empty cache by
mlx-lm's model (loaded with mlx_lm.utils.load_model: its sanitize, its dtypes), and every token but a
window's first is scored by -log softmax (computed in float32 from the model's logits).
Without --float32 the model runs in its stored dtype (bf16 for these checkpoints: what mlx-lm users
get); with it, mlx-lm's set_dtype(float32). Prints one JSON object.
"""
import argparse
import json
import math
import shutil
import tempfile
import time
from pathlib import Path

import mlx.core as mx
from mlx_lm.utils import load_model


def mlx_readable(src: Path, work: Path) -> Path:
    """mlx-lm knows a flat config's qwen3_5_text as qwen3_5 (same fields, same weights)."""
    config = json.loads((src / "config.json").read_text())
    if "text_config" in config or not config.get("model_type", "").endswith("_text"):
        return src
    out = work / src.name
    shutil.copytree(src, out)
    config["model_type"] = config["model_type"].removesuffix("_text")
    (out / "config.json").write_text(json.dumps(config))
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", type=Path, required=True)
    p.add_argument("--tokens", type=Path, required=True, help="JSON list of ids (qwenrt tokenize)")
    p.add_argument("--ctx", type=int, default=512)
    p.add_argument("--float32", action="store_true")
    args = p.parse_args()
    tokens = json.loads(args.tokens.read_text())
    with tempfile.TemporaryDirectory() as tmp:
        model, _ = load_model(mlx_readable(args.model, Path(tmp)))
    if args.float32:
        model.set_dtype(mx.float32)
    nll, scored, windows = 0.0, 0, 0
    t0 = time.time()
    for w0 in range(0, len(tokens) - 1, args.ctx):
        window = tokens[w0 : w0 + args.ctx]
        if len(window) < 2:
            break
        logits = model(mx.array(window)[None])[0].astype(mx.float32)
        logp = logits - mx.logsumexp(logits, axis=-1, keepdims=True)
        targets = mx.array(window[1:])
        picked = mx.take_along_axis(logp[:-1], targets[:, None], axis=-1)
        nll -= mx.sum(picked).item()
        scored += len(window) - 1
        windows += 1
    seconds = time.time() - t0
    dtype = "float32" if args.float32 else "stored"
    print(json.dumps({"perplexity": math.exp(nll / scored), "nll_per_token": nll / scored, "tokens": len(tokens),
                      "tokens_scored": scored, "windows": windows, "ctx": args.ctx, "dtype": dtype,
                      "tokens_per_second": len(tokens) / seconds}))


if __name__ == "__main__":
    main()
