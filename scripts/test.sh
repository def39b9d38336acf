#!/usr/bin/env bash
# The whole test suite: set up, build (release and sanitizers), run every test. This is the README's
# test command and what CI runs.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
# The server tests use the official openai and anthropic clients (pinned); they skip without them.
python3 -m pip install -q -r tests/server/requirements.txt || echo "test.sh: pip install failed; the server client tests will skip"
# `qwenrt quantize` is checked against mlx-lm's own conversion; it skips without mlx-lm.
python3 -m pip install -q -r tests/cli/requirements.txt || echo "test.sh: pip install failed; the quantize_mlx test will skip"
jobs=$(nproc)
# The CUDA backend compiles (and its GPU tests skip) wherever the toolkit is installed, GPU or not.
if [ -x /usr/local/cuda/bin/nvcc ]; then export PATH="/usr/local/cuda/bin:$PATH"; fi
cmake --preset release >/dev/null
cmake --build --preset release -j "$jobs"
ctest --preset release -j "$jobs"
# The same suite under AddressSanitizer and UBSan.
cmake --preset asan >/dev/null
cmake --build --preset asan -j "$jobs" --target qwenrt qwenrt_tests qwenrt_text_tests
ctest --preset asan -j "$jobs"
# Fuzz smoke run: every parser of untrusted input under libFuzzer with sanitizers for a short while.
./scripts/fuzz.sh "${QWENRT_FUZZ_SECONDS:-30}"
