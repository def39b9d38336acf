#!/usr/bin/env bash
# MTP speculative decoding on the CPU with the demo model, on text it never saw (the GPL-3 and
# Apache-2.0 licence texts every Debian system ships; the demo's corpus is listed in
# tools/train_demo/DATA.md): plain vs speculative greedy decode on the same prompts, acceptance per
# draft position. Records the run under bench/results/:  bench/run_speculative.sh [build dir] [threads]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/release}
threads=${2:-$(nproc)}
bin="$build/qwenrt"
model=models/qwen35-demo-16m
out="bench/results/$(date -u +%Y-%m-%d-%H%M)-cpu-mtp-demo.md"
cpu=$(lscpu | sed -n 's/^Model name:[[:space:]]*//p' | head -1)
{
  echo "# MTP speculative decoding, demo model, CPU"
  echo
  echo "- date: $(date -u +%Y-%m-%dT%H:%MZ)"
  echo "- commit: $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- src || echo ' (with uncommitted src changes)')"
  echo "- machine: $cpu, $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB; threads $threads"
  echo "- load average before the run: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo
  echo "Greedy decode of 48 tokens after each of 4 segments (128-token prompts) of each text, plain and"
  echo "speculative alternately 3 times (the fastest run of each counts); the tokens are checked"
  echo "identical. A fixed k measures acceptance per draft position; adaptive is the default mode."
  echo
  # An MTP block that can never draft well (bench/make_unskilled_mtp.py): the cost of drafts that
  # are all rejected, with the adaptive draft length.
  unskilled=$(mktemp -d)/demo-unskilled-mtp
  python3 bench/make_unskilled_mtp.py $model "$unskilled"
  cmd="$bin bench --model $unskilled -f /usr/share/common-licenses/GPL-3 --speculative mtp --draft-tokens 3 --segments 4 --prompt-tokens 128 --gen-tokens 48 --repeats 3 --threads $threads --json"
  echo "## all drafts rejected (mtp.fc zeroed), adaptive"
  echo
  echo "\`$cmd\`"
  echo
  echo '```json'
  $cmd
  echo '```'
  echo
  rm -rf "$(dirname "$unskilled")"
  for text in /usr/share/common-licenses/GPL-3 /usr/share/common-licenses/Apache-2.0; do
    for mode in "--draft-tokens 4 --fixed-draft" "--draft-tokens 1 --fixed-draft" "--draft-tokens 3"; do
      cmd="$bin bench --model $model -f $text --speculative mtp $mode --segments 4 --prompt-tokens 128 --gen-tokens 48 --repeats 3 --threads $threads --json"
      echo "## $(basename "$text"), $mode"
      echo
      echo "\`$cmd\`"
      echo
      echo '```json'
      $cmd
      echo '```'
      echo
    done
  done
} | tee "$out"
