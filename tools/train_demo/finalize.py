#!/usr/bin/env python3
"""Assemble the trained model folder models/NAME from a training run's output.

Usage:
    python3 tools/train_demo/finalize.py --run RUN_DIR --name qwen35-demo-14m

RUN_DIR holds what run_device.sh leaves in $OUT (model.safetensors.part-NN, config.json,
generation_config.json, metrics.json, train.log) or what train.py writes (model.safetensors, ...).
The parts are joined and checked against the sha256 in metrics.json; the tokenizer files come
from tools/train_demo/data/tokenizer, with the Apache-2.0 text that covers Qwen's chat template;
the run's metrics.json and train.log, and the data's meta.json (token counts, package versions and
.deb sha256s) as data.json, are kept under tools/train_demo/runs/NAME/ as the record of the run. The model card (README.md) is
written by hand from those numbers and is not touched here.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja")
APACHE = REPO.parent / "shared/tokenizers/LICENSE-Apache-2.0.txt"   # Qwen's chat template licence


def join_parts(run: Path, target: Path) -> None:
    parts = sorted(run.glob("model.safetensors.part-*"))
    if parts:
        with open(target, "wb") as out:
            for part in parts:
                out.write(part.read_bytes())
    else:
        shutil.copyfile(run / "model.safetensors", target)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--run", type=Path, required=True)
    ap.add_argument("--name", required=True)
    ap.add_argument("--data", type=Path, default=HERE / "data")
    ap.add_argument("--models", type=Path, default=REPO / "models", help="where the model folder goes")
    ap.add_argument("--record", type=Path, default=HERE / "runs", help="where the run's log and metrics go")
    args = ap.parse_args()

    folder = args.models / args.name
    folder.mkdir(parents=True, exist_ok=True)
    metrics = json.loads((args.run / "metrics.json").read_text())
    join_parts(args.run, folder / "model.safetensors")
    digest = hashlib.sha256((folder / "model.safetensors").read_bytes()).hexdigest()
    if digest != metrics["model_sha256"]:
        raise SystemExit(f"model.safetensors sha256 {digest} != {metrics['model_sha256']} recorded by the run")
    for name in ("config.json", "generation_config.json"):
        shutil.copyfile(args.run / name, folder / name)
    for name in TOKENIZER_FILES:
        shutil.copyfile(args.data / "tokenizer" / name, folder / name)
    shutil.copyfile(APACHE, folder / "LICENSE-Apache-2.0.txt")

    record = args.record / args.name
    record.mkdir(parents=True, exist_ok=True)
    for name in ("metrics.json", "train.log"):
        if (args.run / name).exists():
            shutil.copyfile(args.run / name, record / name)
    shutil.copyfile(args.data / "meta.json", record / "data.json")
    print(f"{folder}: model.safetensors sha256 {digest} ({(folder / 'model.safetensors').stat().st_size:,} bytes)")


if __name__ == "__main__":
    main()
