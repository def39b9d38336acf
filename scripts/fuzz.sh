#!/usr/bin/env bash
# Builds the libFuzzer targets with clang and runs each for a while (default 60 s; CI uses 30), one per core:
#   scripts/fuzz.sh [seconds] [target...]
# The targets are every fuzz/*_fuzz.cpp (CMake builds the same glob); each gets a seed corpus from
# the committed fixtures (and the real tokenizer files of ../shared/tokenizers when present).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
shift || true
if [ $# -gt 0 ]; then
  targets=("$@")
else
  targets=()
  for f in fuzz/*_fuzz.cpp; do targets+=("$(basename "$f" .cpp)"); done
fi
shared=""
for d in "${QWENRT_SHARED_DIR:-}" ../shared /work/shared; do
  if [ -n "$d" ] && [ -d "$d/tokenizers" ]; then shared=$d; break; fi
done

cmake --preset fuzz >/dev/null
cmake --build --preset fuzz -j "$(nproc)" --target "${targets[@]}"

# Seeds for one target into build/fuzz/corpus/<target>.
seed() {
  local t=$1 c=build/fuzz/corpus/$1 f n
  mkdir -p "$c"
  case $t in
    config_fuzz)
      for f in tests/fixtures/*/config.json models/*/config.json; do cp "$f" "$c/$(basename "$(dirname "$f")").json"; done ;;
    safetensors_header_fuzz)
      for f in tests/fixtures/*/model.safetensors tests/fixtures/*/model-*.safetensors; do
        [ -f "$f" ] && head -c 65536 "$f" > "$c/$(basename "$(dirname "$f")")_$(basename "$f")"
      done ;;
    generation_config_fuzz)
      for f in tests/fixtures/*/generation_config.json models/*/generation_config.json; do cp "$f" "$c/$(basename "$(dirname "$f")").json"; done
      if [ -n "$shared" ]; then  # JSON of the same family (token ids, nesting) from the real tokenizers
        for f in "$shared"/tokenizers/*/tokenizer_config.json; do head -c 65536 "$f" > "$c/$(basename "$(dirname "$f")")_tokenizer_config.json"; done
      fi ;;
    checkpoint_index_fuzz)
      # The index alone (bound against the fixture's config), and index + NUL + a config.
      for f in tests/fixtures/*/model.safetensors.index.json; do
        n=$(basename "$(dirname "$f")")
        cp "$f" "$c/$n.json"
        for g in tests/fixtures/*/config.json; do
          { cat "$f"; printf '\0'; cat "$g"; } > "$c/${n}_with_$(basename "$(dirname "$g")").bin"
        done
      done ;;
    npy_fuzz)
      # One whole (valid) array, and the headers of the others.
      cp tests/fixtures/dense_tied/greedy_logits.npy "$c/dense_tied_greedy_logits.npy"
      for f in tests/fixtures/*/*.npy; do head -c 4096 "$f" > "$c/$(basename "$(dirname "$f")")_$(basename "$f" .npy)_head.npy"; done ;;
    tokenizer_load_fuzz)
      tar -xJOf tests/data/tokenizer/qwen3/tokenizer.json.tar.xz tokenizer.json > "$c/qwen3_tokenizer.json"
      if [ -n "$shared" ]; then
        for f in "$shared"/tokenizers/*/tokenizer.json; do cp "$f" "$c/$(basename "$(dirname "$f")")_shared_tokenizer.json"; done
      fi ;;
    tokenizer_encode_fuzz)
      # Lines of the golden files (their inputs: multilingual text, code, whitespace runs).
      n=0
      for f in tests/data/tokenizer/qwen3/golden_encode.jsonl tests/data/tokenizer/qwen3/golden_multilingual.jsonl tests/data/tokenizer/pretokenize_goldens.jsonl; do
        while IFS= read -r line && [ $n -lt 400 ]; do printf '%s' "$line" > "$c/line_$n.txt"; n=$((n + 1)); done < "$f"
      done ;;
    split_regex_fuzz)
      # Patterns of the real tokenizers (first line) followed by some text.
      python3 - "$c" <<'PY'
import json, sys, glob, tarfile
out = sys.argv[1]
def tokenizers():
    for f in glob.glob("tests/data/tokenizer/*/tokenizer.json"):
        yield json.load(open(f, encoding="utf-8"))
    for f in glob.glob("tests/data/tokenizer/*/tokenizer.json.tar.xz"):
        with tarfile.open(f) as t:
            yield json.load(t.extractfile("tokenizer.json"))
for i, tok in enumerate(tokenizers()):
    pt = tok.get("pre_tokenizer") or {}
    stack, n = [pt], 0
    while stack:
        p = stack.pop()
        stack += p.get("pretokenizers", [])
        r = (p.get("pattern") or {}).get("Regex")
        if r:
            open(f"{out}/pattern_{i}_{n}.txt", "w", encoding="utf-8").write(r.replace("\n", "\\n") + "\nHello world's 123  ü\n\n  x\tyz")
            n += 1
PY
      printf "'s|'t| ?\\p{L}+| ?\\p{N}+|\\s+(?!\\S)|\\s+\nThe 2 cats' toys  \n" > "$c/gpt2.txt" ;;
    chat_template_fuzz)
      for f in tests/data/chat_template/*.jinja; do cp "$f" "$c/$(basename "$f")"; done
      python3 - "$c" <<'PY'
import json, sys
out = sys.argv[1]
cases = json.load(open("tests/data/chat_template/jinja_feature_goldens.json", encoding="utf-8"))
cases = cases.get("cases", cases) if isinstance(cases, dict) else cases
for i, case in enumerate(cases[:300] if isinstance(cases, list) else []):
    src = case.get("template") if isinstance(case, dict) else None
    if isinstance(src, str):
        open(f"{out}/feature_{i}.jinja", "w", encoding="utf-8").write(src)
PY
      ;;
    chat_request_fuzz)
      python3 - "$c" <<'PY'
import json, sys
out = sys.argv[1]
cases = json.load(open("tests/data/chat_template/request_goldens.json", encoding="utf-8"))["cases"]
for i, case in enumerate(cases):
    open(f"{out}/request_{i}.json", "w", encoding="utf-8").write(json.dumps(case["request"], ensure_ascii=False))
PY
      ;;
    server_request_fuzz)
      # Bodies of each route's shape (OpenAI chat, completion, Anthropic messages) and the chat
      # requests of the template goldens.
      python3 - "$c" <<'PY'
import json, sys
out = sys.argv[1]
tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]
bodies = [
    {"model": "m", "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": [{"type": "text", "text": "Hi"}]}],
     "max_tokens": 16, "temperature": 0.7, "top_p": 0.9, "top_k": 20, "min_p": 0.05, "seed": 1, "stop": ["\n\n"], "stream": True,
     "stream_options": {"include_usage": True}, "chat_template_kwargs": {"enable_thinking": False}},
    {"messages": [{"role": "user", "content": "Weather?"}, {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "18 C"}], "tools": tools, "tool_choice": "auto", "max_completion_tokens": 8},
    {"prompt": "Once upon a time", "max_tokens": 8, "ignore_eos": True, "presence_penalty": 0.5, "frequency_penalty": 0.5},
    {"prompt": [1, 2, 3, 4], "max_tokens": 4, "repetition_penalty": 1.1},
    {"model": "m", "max_tokens": 32, "system": [{"type": "text", "text": "Terse."}], "stop_sequences": ["END"], "messages": [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": [{"type": "thinking", "thinking": "Call it.", "signature": ""},
                                          {"type": "tool_use", "id": "t1", "name": "get_weather", "input": {"city": "Paris"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text", "text": "18 C"}]}]}],
     "tools": [{"name": "get_weather", "input_schema": {"type": "object"}}], "thinking": {"type": "enabled", "budget_tokens": 64}},
]
for i, b in enumerate(bodies):
    open(f"{out}/body_{i}.json", "w", encoding="utf-8").write(json.dumps(b, ensure_ascii=False))
cases = json.load(open("tests/data/chat_template/request_goldens.json", encoding="utf-8"))["cases"]
for i, case in enumerate(cases[:100]):
    open(f"{out}/golden_{i}.json", "w", encoding="utf-8").write(json.dumps({**case["request"], "max_tokens": 8}, ensure_ascii=False))
PY
      ;;
    *) echo "fuzz.sh: no seeds for $t (add them to seed())" >&2 ;;
  esac
}

# `nproc` targets at a time, each on its own core for its whole time (CI's 2 cores: half the wall
# time of one after another); a target that fails fails the run, its log printed.
failed=()
run_batch() {
  local pids=() t i=0
  for t in "$@"; do
    "./build/fuzz/$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 "build/fuzz/corpus/$t" >"build/fuzz/$t.log" 2>&1 &
    pids+=($!)
  done
  for t in "$@"; do
    if wait "${pids[$i]}"; then
      echo "== $t: $(tail -1 "build/fuzz/$t.log")"
    else
      echo "== $t FAILED:"
      tail -60 "build/fuzz/$t.log"
      failed+=("$t")
    fi
    i=$((i + 1))
  done
}
batch=()
for t in "${targets[@]}"; do
  seed "$t"
  echo "== $t ($seconds s)"
  batch+=("$t")
  if [ "${#batch[@]}" -ge "$(nproc)" ]; then
    run_batch "${batch[@]}"
    batch=()
  fi
done
if [ "${#batch[@]}" -gt 0 ]; then run_batch "${batch[@]}"; fi
if [ "${#failed[@]}" -gt 0 ]; then
  echo "fuzz.sh: failed: ${failed[*]}" >&2
  exit 1
fi
