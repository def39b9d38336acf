#!/usr/bin/env bash
# Builds the libFuzzer targets with clang and runs each for a while (default 60 s):
#   scripts/fuzz.sh [seconds]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
cmake --preset fuzz >/dev/null
cmake --build --preset fuzz -j "$(nproc)" --target config_fuzz safetensors_header_fuzz
# Seed corpora from the committed fixtures.
mkdir -p build/fuzz/corpus/config build/fuzz/corpus/safetensors
for f in tests/fixtures/*/config.json; do cp "$f" "build/fuzz/corpus/config/$(basename "$(dirname "$f")").json"; done
for f in tests/fixtures/*/model.safetensors; do head -c 65536 "$f" > "build/fuzz/corpus/safetensors/$(basename "$(dirname "$f")")"; done
./build/fuzz/config_fuzz -max_total_time="$seconds" build/fuzz/corpus/config
./build/fuzz/safetensors_header_fuzz -max_total_time="$seconds" build/fuzz/corpus/safetensors
