#!/usr/bin/env bash
# Runs the CPU benchmarks and records the results under bench/results/ with date, commit, machine
# and commands:  bench/run_cpu.sh [threads]
set -euo pipefail
cd "$(dirname "$0")/.."
threads=${1:-$(nproc)}
cmake --preset release >/dev/null
cmake --build --preset release --target qwenrt matmul_bench prompt_gemm_bench >/dev/null
out="bench/results/$(date -u +%Y-%m-%d-%H%M)-cpu-0.8b.md"  # one file per run: runs are compared, not overwritten
cpu=$(lscpu | sed -n 's/^Model name:[[:space:]]*//p' | head -1)
{
  echo "# CPU benchmark, Qwen3.5-0.8B shapes (random bf16 weights)"
  echo
  echo "- date: $(date -u +%Y-%m-%dT%H:%MZ)"
  echo "- commit: $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- src || echo ' (with uncommitted src changes)')"
  echo "- machine: $cpu, $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB; threads $threads"
  echo "- load average before the run: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo
  echo "Floor = bytes a decode step must stream (all weight matrices incl. the tied head, DeltaNet"
  echo "state read+write, KV read) / read bandwidth measured in the same run."
  echo
  for b in 1 4; do
    cmd="./build/release/qwenrt bench --synthetic 0.8b --prompt-tokens 128 --gen-tokens 16 --batch $b --threads $threads --json"
    echo "## batch $b"
    echo
    echo "\`$cmd\`"
    echo
    echo '```json'
    $cmd
    echo '```'
    echo
  done
  echo "## weight-streaming matmul"
  echo
  echo "\`./build/release/matmul_bench $threads\`"
  echo
  echo '```'
  ./build/release/matmul_bench "$threads"
  echo '```'
  echo
  echo "## prompt-window products (blocked vs one-row kernel, against the FMA peak)"
  echo
  echo "\`./build/release/prompt_gemm_bench $threads 3\`"
  echo
  echo '```'
  ./build/release/prompt_gemm_bench "$threads" 3
  echo '```'
} | tee "$out"
echo "recorded in $out"
