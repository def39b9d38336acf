#!/usr/bin/env bash
# Sets up the machine, builds qwenrt, and runs the main job: the demo Qwen 3.5 model that ships in
# models/ answers a prompt; then `info` describes it and `bench` measures decode speed on random
# weights with the real shapes of Qwen3.5-0.8B.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)" --target qwenrt
model=$(dirname "$(ls models/*/config.json | head -1)")
echo "== qwenrt run -p 'Tell me about the river Jordan.'   (model: $model; its reasoning on stderr, the answer on stdout)"
./build/release/qwenrt run -p "Tell me about the river Jordan." --max-tokens 200 --seed 1
echo "== qwenrt info --model $model"
./build/release/qwenrt info --model "$model"
echo "== qwenrt bench --synthetic 0.8b"
./build/release/qwenrt bench --synthetic 0.8b --prompt-tokens 64 --gen-tokens 8
