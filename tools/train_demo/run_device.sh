#!/usr/bin/env bash
# The training run on the GPU machine (the device tool's `run`), from the repository root:
#
#   run(command="bash tools/train_demo/run_device.sh 450", timeout_s=600,
#       carry=["tools/train_demo/data", "tools/train_demo/wheels"])
#
# (check first with `python3 tools/train_demo/check_carry.py` that the tree and the carried
# folders fit the tool's 64 MiB; README.md, "Train and ship", has the whole recipe.)
#
# Local smoke run of the same script (CPU, tiny model with the released head sizes):
#   OUT=/tmp/out WHEELS=0 bash tools/train_demo/run_device.sh 20 \
#     --size tiny256 --seq-len 128 --batch 4 --eval-every 5 --device cpu --max-val-tokens 3000
#
# $1 = seconds for the training loop (--time-budget; the chosen step count is recorded in
# metrics.json, and `train.py --steps N` reproduces the run); further arguments go to train.py.
# Needs $OUT (the tool sets it). The device tool stops a command after 600 s, so train.py gets a
# --deadline that leaves time to evaluate and write the model: budget 450 -> ~540 s in all.
#
# The machine has no network, so the data (tools/train_demo/data, made by make_tokenizer.py) and
# the exact transformers used here (tools/train_demo/wheels: transformers and its `regex` pin,
# fetched with `pip download`, see README.md) travel with the call; without the wheels folder (or
# with WHEELS=0) the machine's own transformers is used, and its version is recorded. Files come
# back only from $OUT, at most 8 of at most 16 MiB each, so model.safetensors returns cut into
# 15 MB parts (finalize.py joins them and checks the sha256 recorded in metrics.json).
set -euo pipefail
budget=${1:?seconds for the training loop}
shift
: "${OUT:?set by the device tool}"
python=${PYTHON:-python3}

if [[ ${WHEELS:-1} != 0 ]] && compgen -G "tools/train_demo/wheels/*.whl" >/dev/null; then
  "$python" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
    tools/train_demo/wheels/*.whl
  export PYTHONPATH=/tmp/site
fi
export PYTHONUNBUFFERED=1
"$python" -c 'import transformers.models.qwen3_5 as m, transformers; print("transformers", transformers.__version__)'
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true

work=$(mktemp -d /tmp/demo_run.XXXX)
"$python" tools/train_demo/train.py --out "$work" --time-budget "$budget" --deadline $((budget + 60)) "$@" 2>&1 \
  | tee "$OUT/train.log"

cp "$work/config.json" "$work/generation_config.json" "$work/metrics.json" "$OUT/"
split -b 15000000 -d -a 2 "$work/model.safetensors" "$OUT/model.safetensors.part-"
ls -l "$OUT"
