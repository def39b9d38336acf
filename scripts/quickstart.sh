#!/usr/bin/env bash
# Sets up the machine, builds qwenrt, and runs the main job: describe and run a Qwen 3.5 checkpoint
# (the committed tiny oracle checkpoint until the demo model lands), then measure decode speed on
# random weights with the real shapes of Qwen3.5-0.8B.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)" --target qwenrt
model=tests/fixtures/vlm
echo "== qwenrt info --model $model"
./build/release/qwenrt info --model "$model"
echo "== qwenrt generate (greedy, 16 tokens)"
./build/release/qwenrt generate --model "$model" --tokens 17,42,256,7,99 --max-tokens 16 --temperature 0 --json
echo "== qwenrt bench --synthetic 0.8b"
./build/release/qwenrt bench --synthetic 0.8b --prompt-tokens 64 --gen-tokens 8
