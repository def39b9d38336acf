#!/usr/bin/env bash
# qwenrt and llama.cpp on the same CPU, alternated: prompt (P tokens) and decode (G tokens) tok/s,
# each engine REPS times, medians and their ratio. For a pair of checkpoints with the same weights:
# a GGUF for llama.cpp and a checkpoint directory for qwenrt (bf16 both, or llama.cpp's Q4_0 beside
# qwenrt's MLX affine 4-bit g64: 4.5 bits a weight both).
#   bench/cpu_side_by_side.sh LLAMA_BENCH MODEL.gguf QWENRT MODEL_DIR [REPS]
# LLAMA_BENCH and the GGUF come from ../shared/peers/llamacpp/peer_llamacpp_cpu.sh (its .peer/ build
# and checkpoint; `llama-quantize MODEL-bf16.gguf OUT.gguf Q4_0` for the 4-bit one); P, G, THREADS
# override 64, 64, 2; QWENRT_ARGS adds options to `qwenrt bench` (e.g. --int8-activations).
set -euo pipefail
llama=${1:?usage: cpu_side_by_side.sh LLAMA_BENCH MODEL.gguf QWENRT MODEL_DIR [REPS]}
gguf=${2:?} qwenrt=${3:?} model=${4:?} reps=${5:-3}
P=${P:-64} G=${G:-64} THREADS=${THREADS:-2}
out=$(mktemp -d)
for r in $(seq 1 "$reps"); do
  "$llama" -m "$gguf" -p "$P" -n "$G" -t "$THREADS" -r 1 -o json > "$out/llama_$r.json" 2> /dev/null
  "$qwenrt" bench --model "$model" --prompt-tokens "$P" --gen-tokens "$G" --threads "$THREADS" ${QWENRT_ARGS:-} --json > "$out/qwenrt_$r.json" 2> /dev/null
  echo "rep $r done (load $(cut -d' ' -f1 /proc/loadavg))" >&2
done
python3 - "$out" "$reps" "$P" "$G" <<'PY'
import json, statistics as st, sys
out, reps, P, G = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
L = {"pp": [], "tg": []}; Q = {"pp": [], "tg": []}
for r in range(1, reps + 1):
    for t in json.load(open(f"{out}/llama_{r}.json")):
        L["pp" if t["n_prompt"] and not t["n_gen"] else "tg"].append(t["avg_ts"])
    q = json.load(open(f"{out}/qwenrt_{r}.json"))
    Q["pp"].append(q["prefill_tok_s"]); Q["tg"].append(q["decode_tok_s"])
f = lambda xs: " ".join(f"{x:.1f}" for x in xs)
print(f"{'metric':18} {'llama.cpp (each rep)':>24} {'qwenrt (each rep)':>24} {'median L':>9} {'median Q':>9} {'Q/L':>5}")
for k, name in (("pp", f"prompt ({P})"), ("tg", f"decode ({G})")):
    ml, mq = st.median(L[k]), st.median(Q[k])
    print(f"{name:18} {f(L[k]):>24} {f(Q[k]):>24} {ml:9.1f} {mq:9.1f} {mq / ml:5.2f}")
PY
rm -rf "$out"
