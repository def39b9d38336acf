#!/usr/bin/env python3
"""Compare single-threaded encode throughput: qwenrt's C++ tokenizer vs HF tokenizers.

Usage (from the repository root, after building bench/tokenizer_bench.cpp):
    /work/pyenv/bin/python tools/text/bench_tokenizer.py --bench build/release/tokenizer_bench

Builds two test texts in /tmp (multilingual: the golden corpus generator with another seed;
code: Python standard-library sources), encodes each with HF `tokenizers` (one thread,
one encode call on the whole text, best of N) and with the C++ binary on the same file, checks
that both produce the same ids (count and a hash), and prints MB/s and the speed ratio.
"""
import argparse
import glob
import hashlib
import json
import os
import random
import subprocess
import sys
import time

os.environ["RAYON_NUM_THREADS"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"

from tokenizers import Tokenizer  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
import make_tokenizer_goldens as goldens  # noqa: E402


def multilingual_text(target_bytes):
    goldens.SEED = 12345
    parts, size = [], 0
    while size < target_bytes:
        for t in goldens.corpus():
            parts.append(t)
            size += len(t.encode("utf-8"))
        goldens.SEED += 1
    return "\n".join(parts)


def code_text(target_bytes):
    parts, size = [], 0
    for path in sorted(glob.glob(os.path.join(os.path.dirname(os.__file__), "*.py"))):
        with open(path, encoding="utf-8", errors="replace") as f:
            t = f.read()
        parts.append(t)
        size += len(t.encode("utf-8"))
        if size >= target_bytes:
            break
    return "".join(parts)


def fnv1a(ids):
    h = 1469598103934665603
    for i in ids:
        h = ((h ^ (i & 0xFFFFFFFF)) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def hf_bench(tok, text, repetitions):
    best, ids = 1e30, None
    for _ in range(repetitions):
        t0 = time.perf_counter()
        ids = tok.encode(text, add_special_tokens=False).ids
        best = min(best, time.perf_counter() - t0)
    return best, ids


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bench", required=True, help="path of the built tokenizer_bench binary")
    parser.add_argument("--tokenizer", default=os.path.join(ROOT, "tests", "data", "tokenizer", "qwen3"))
    parser.add_argument("--mb", type=float, default=2.0, help="size of each test text")
    parser.add_argument("--repetitions", type=int, default=3)
    args = parser.parse_args()
    tok = Tokenizer.from_file(os.path.join(args.tokenizer, "tokenizer.json"))
    target = int(args.mb * 1e6)
    for name, text in (("multilingual", multilingual_text(target)), ("code", code_text(target))):
        path = f"/tmp/qwenrt_bench_{name}.txt"
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        size = len(text.encode("utf-8"))
        hf_s, hf_ids = hf_bench(tok, text, args.repetitions)
        out = subprocess.run([args.bench, args.tokenizer, path, str(args.repetitions)],
                             check=True, capture_output=True, text=True).stdout
        cpp = json.loads(out)
        same = cpp["ids_fnv1a"] == fnv1a(hf_ids)
        print(f"{name:13s} {size / 1e6:5.2f} MB  tokens {len(hf_ids):8d} "
              f"({'identical ids' if same else 'IDS DIFFER'})  HF {size / 1e6 / hf_s:6.2f} MB/s  "
              f"qwenrt {cpp['encode_mb_per_s']:6.2f} MB/s (first run {size / 1e6 / cpp['encode_first_s']:.2f})  "
              f"speedup {cpp['encode_mb_per_s'] / (size / 1e6 / hf_s):4.1f}x  load {cpp['load_s']:.2f}s")


if __name__ == "__main__":
    main()
