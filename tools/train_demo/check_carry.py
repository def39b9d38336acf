#!/usr/bin/env python3
"""Add up what a device call would send: the working tree plus the carried folders, against 64 MiB.

Usage (from the repository root):
    python3 tools/train_demo/check_carry.py [CARRIED_PATH ...]
    (default: tools/train_demo/data tools/train_demo/wheels)

The device tool sends tracked files and untracked files that git does not ignore (as they are in
the working tree: a file deleted there is not sent), plus each carried path, and refuses more
than 64 MiB. Exit status 1 when the total is over, with the largest items listed.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

LIMIT = 64 * 2**20


def tree_files(repo: Path) -> list[Path]:
    out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=repo,
                         check=True, capture_output=True).stdout
    return [repo / p for p in out.decode().split("\0") if p and (repo / p).is_file()]


def main() -> None:
    repo = Path(__file__).resolve().parents[2]   # this checkout, wherever the command runs from
    carried = sys.argv[1:] or ["tools/train_demo/data", "tools/train_demo/wheels"]
    items = [(f.stat().st_size, str(f.relative_to(repo))) for f in tree_files(repo)]
    tree = sum(s for s, _ in items)
    total = tree
    print(f"working tree {tree / 2**20:6.1f} MiB ({len(items)} files)")
    for c in carried:
        path = repo / c
        size = sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) if path.exists() else 0
        total += size
        print(f"carry {c:32s} {size / 2**20:6.1f} MiB{'' if path.exists() else ' (missing)'}")
    print(f"total {total / 2**20:.1f} MiB of {LIMIT / 2**20:.0f} MiB")
    if total > LIMIT:
        print("over the limit; the largest tracked files:")
        for s, name in sorted(items, reverse=True)[:5]:
            print(f"  {s / 2**20:6.1f} MiB {name}")
        sys.exit(1)


if __name__ == "__main__":
    main()
