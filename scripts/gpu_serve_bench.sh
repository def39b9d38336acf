#!/usr/bin/env bash
# The serving benchmark on the GPU machine, over binaries built by scripts/gpu_pack.sh:
#   scripts/gpu_serve_bench.sh BIN_DIR SIZE CTX "C:PROMPT:OUTPUT:REQUESTS ..."
# e.g. scripts/gpu_serve_bench.sh .gpu 27b 9216 "1:8192:256:2 8:8192:1024:8 64:8192:1024:64"
# Starts `qwenrt serve --synthetic SIZE --device cuda` with --max-seqs the largest concurrency,
# runs bench/serve_load.py at each concurrency (one warm-up request first), then `qwenrt bench`'s
# decode step at the same prompt length for the time-per-output-token comparison. Prints one table.
# Logs go to $OUT/$TAG (TAG defaults to "serve"). SERVE_ARGS adds options to `serve` (e.g. "--prefill-chunk 2048"); BENCH=0 skips `qwenrt bench`.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/gpu_libs.sh
bin=$(gpu_bin_dir "${1:?BIN_DIR}")
size=${2:?SIZE}
ctx=${3:?CTX}
configs=${4:?configs}
keep=${OUT:-/tmp/qwenrt-gpu}/${TAG:-serve}
mkdir -p "$keep"
max=1
for c in $configs; do n=${c%%:*}; [ "$n" -gt "$max" ] && max=$n; done
port=8093
"$bin/qwenrt" serve --synthetic "$size" --device cuda --ctx-size "$ctx" --max-seqs "$max" --port "$port" ${SERVE_ARGS:-} \
  >"$keep/serve-$size.log" 2>&1 &
server=$!
for _ in $(seq 1 600); do
  curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1 && break
  kill -0 $server 2>/dev/null || { echo "server exited:"; tail -20 "$keep/serve-$size.log"; exit 1; }
  sleep 0.5
done
table=()
for cfg in $configs; do
  IFS=: read -r c prompt output requests <<<"$cfg"
  echo "=== concurrency $c, $prompt-token prompts, $output-token outputs, $requests requests"
  line=$(timeout 400 python3 bench/serve_load.py --url "http://127.0.0.1:$port" --concurrency "$c" --prompt-tokens "$prompt" \
    --output-tokens "$output" --requests "$requests" --json 2>&1 | python3 -c 'import json,sys; t=sys.stdin.read(); print(json.dumps(json.loads(t[t.index("{"):])) if "{" in t else t.strip().replace("\n", " | "))')
  echo "$line" | tee -a "$keep/serve-$size.json"
  table+=("$c $prompt $output $(echo "$line" | python3 -c 'import json,sys; j=json.load(sys.stdin); print("%.1f tok/s  ttft p50 %.0f ms p99 %.0f ms  tpot p50 %.2f ms  itl p99 %.1f ms" % (j["output_tok_s"], j["ttft_ms"]["p50"], j["ttft_ms"]["p99"], j["tpot_ms"]["p50"], j["itl_ms"]["p99"]))' 2>/dev/null || echo "$line")")
done
curl -s "http://127.0.0.1:$port/metrics" >"$keep/metrics-$size.txt"
# Where the server's time went (all runs together): model steps by kind, snapshots, the rest.
steps=$(python3 - "$keep/metrics-$size.txt" <<'PY'
import re, sys
t = open(sys.argv[1]).read()
v = lambda name, kind=None: float(re.search(r"^%s%s (\S+)$" % (name, r'\{kind="%s"\}' % kind if kind else ""), t, re.M).group(1))
busy = v("qwenrt_scheduler_busy_seconds_total")
parts = []
for kind in ("decode", "window"):
    n, rows, sec = v("qwenrt_model_steps_total", kind), v("qwenrt_model_step_rows_total", kind), v("qwenrt_model_step_seconds_total", kind)
    parts.append("%s steps %d (%.1f rows, %.1f ms each) %.1f s" % (kind, n, rows / max(n, 1), 1e3 * sec / max(n, 1), sec))
snap = v("qwenrt_prefix_cache_snapshot_seconds_total")
rest = busy - snap - sum(v("qwenrt_model_step_seconds_total", k) for k in ("decode", "window"))
mixed = re.search(r"^qwenrt_mixed_steps_total (\S+)$", t, re.M)
mixed = " (%d of them mixed)" % float(mixed.group(1)) if mixed else ""
print("busy %.1f s: %s%s; snapshots %.1f s; other %.1f s" % (busy, "; ".join(parts), mixed, snap, rest))
PY
)
table+=("time: $steps")
kill -TERM $server; wait $server; echo "server exit: $?"
# The engine's own decode step at the same context, for the concurrency-1 time per output token.
[ "${BENCH:-1}" = 0 ] && { printf '%s\n' "${table[@]}"; exit 0; }
first_prompt=$(echo "$configs" | awk '{split($1, a, ":"); print a[2]}')
step=$("$bin/qwenrt" bench --device cuda --synthetic "$size" --prompt-tokens "$first_prompt" --gen-tokens 64 --json 2>/dev/null |
  python3 -c 'import json,sys; j=json.load(sys.stdin); print("%.1f tok/s = %.2f ms per step, %.0f%% of floor" % (j["decode_tok_s"], 1e3/j["decode_tok_s"], 100*j["decode_fraction_of_floor"]))')
echo
echo "=== serving, --synthetic $size on $(nvidia-smi --query-gpu=name --format=csv,noheader)"
echo "concurrency prompt output | result"
printf '%s\n' "${table[@]}"
echo "qwenrt bench decode at $first_prompt: $step"
