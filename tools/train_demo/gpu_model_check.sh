#!/usr/bin/env bash
# The trained model on the GPU machine, over binaries built here by scripts/gpu_pack.sh (carried in
# .gpu): `--device cuda` loads it, its greedy tokens equal greedy_reference.json, its logits match
# the CPU path of the same binary, `run` answers with default options, and the decode speed.
#
#   run(command="bash tools/train_demo/gpu_model_check.sh models/NAME", timeout_s=300, carry=[".gpu"])
#
# Writes $OUT/gpu_check.json (model_card.py reads it: finalize.py --gpu-check DIR) and the logs.
# DEVICE=cpu BIN_DIR=build/dev runs the same steps on the CPU (a check of this script).
set -uo pipefail
model=${1:?model folder}
: "${OUT:?set by the device tool}"
source scripts/gpu_libs.sh
bin=$(gpu_bin_dir "${BIN_DIR:-.gpu}")
q="$bin/qwenrt"
dev=${DEVICE:-cuda}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >"$OUT/gpu.txt" 2>/dev/null || echo "$dev (no nvidia-smi)" >"$OUT/gpu.txt"
ref="$model/greedy_reference.json"
ids=$(python3 -c 'import json,sys; print(",".join(map(str, json.load(open(sys.argv[1]))["prompt_ids"])))' "$ref")
n=$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["greedy_ids"]))' "$ref")
"$q" generate --device "$dev" --model "$model" --tokens "$ids" --max-tokens "$n" --temperature 0 --json >"$OUT/generate_cuda.json" 2>"$OUT/generate_cuda.err"
"$q" logits --device "$dev" --model "$model" --tokens "$ids" --out /tmp/logits_cuda.npy 2>>"$OUT/generate_cuda.err"
"$q" logits --device cpu --model "$model" --tokens "$ids" --out /tmp/logits_cpu.npy 2>>"$OUT/generate_cuda.err"
"$q" run --device "$dev" --model "$model" -p "Tell me about the river Jordan." --seed 1 --json >"$OUT/run_cuda.json" 2>"$OUT/run_cuda.err"
"$q" bench --device "$dev" --model "$model" --prompt-tokens 512 --gen-tokens 128 --json >"$OUT/bench_cuda.json" 2>"$OUT/bench_cuda.err"
python3 - "$ref" "$OUT" <<'EOF'
import json, sys
import numpy as np
ref, out = json.load(open(sys.argv[1])), sys.argv[2]
def load(name):
    try:
        return json.loads(open(f"{out}/{name}").read().strip().splitlines()[-1])
    except Exception as e:   # noqa: BLE001 - report what failed, keep the rest
        return {"error": repr(e)}
gen = load("generate_cuda.json")
a, b = np.load("/tmp/logits_cuda.npy"), np.load("/tmp/logits_cpu.npy")
result = {
    "gpu": open(f"{out}/gpu.txt").read().strip(),
    "greedy_equal": gen.get("tokens") == ref["greedy_ids"], "greedy_tokens": gen.get("tokens"),
    "logits_rel_l2_cuda_vs_cpu": float(np.linalg.norm(a.astype(np.float64) - b) / np.linalg.norm(b)),
    "run": load("run_cuda.json"), "bench": load("bench_cuda.json"),
}
open(f"{out}/gpu_check.json", "w").write(json.dumps(result, indent=2) + "\n")
print(json.dumps({k: v for k, v in result.items() if k != "run"}, indent=1))
EOF
