#!/usr/bin/env python3
"""Write a demo model's card (README.md) from its run record (finalize.py calls this).

Usage:
    python3 tools/train_demo/model_card.py --model models/NAME --record tools/train_demo/runs/NAME

Reads the folder's config.json and greedy_reference.json and the record's metrics.json,
data.json, eval.json, and where present parity.json, cpu_bench.json, run_default.json,
gpu_check.json, loops.json, loops_kept_aside.json and samples.md. Every number in the card comes from those files; a measurement
whose file is missing is written as "not measured yet" with the command that makes it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import platform
from pathlib import Path

MTP_GOAL = 0.60


def plural(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def load(path: Path):
    return json.loads(path.read_text()) if path.exists() else None


def cpu_name() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines() if Path("/proc/cpuinfo").exists() else []:
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown CPU"


def card(model: Path, record: Path) -> str:
    name = model.name
    cfg = json.loads((model / "config.json").read_text())
    metrics = json.loads((record / "metrics.json").read_text())
    data = json.loads((record / "data.json").read_text())
    evals = load(record / "eval.json") or []
    parity, cpu, run, gpu = (load(record / f) for f in ("parity.json", "cpu_bench.json", "run_default.json", "gpu_check.json"))
    ref = load(model / "greedy_reference.json")
    weights = model / "model.safetensors"
    sha = hashlib.sha256(weights.read_bytes()).hexdigest()
    n_attn = cfg["layer_types"].count("full_attention")
    todo = "not measured yet"
    out = [f"# {name}", "",
           f"A {metrics['parameters'] / 1e6:.1f}-million-parameter **Qwen 3.5** language model trained from scratch by the qwenrt "
           "project so that a fresh checkout has a model to run on every backend. It is a `Qwen3_5ForCausalLM` text model with "
           "the released head sizes and **one MTP block**, stored exactly like a released Qwen 3.5 checkpoint. It was trained on "
           "public-domain and permissively licensed text and on conversations in Qwen 3.5's chat template (thinking and not, "
           "multi-turn, tool calls) built from dictionaries, the Bible and the Python and SQLite documentation. It is a "
           "demonstration and test model, not an assistant: it knows little and invents freely.", "",
           "## Files", "", "| file | content |", "|---|---|",
           f"| `model.safetensors` | {weights.stat().st_size:,} bytes; bf16, `linear_attn.A_log` and `linear_attn.norm.weight` F32; sha256 `{sha}` |",
           "| `config.json`, `generation_config.json` | flat text config (`Qwen3_5ForCausalLM`, `mtp_num_hidden_layers: 1`); sampling defaults |",
           "| `tokenizer.json`, `tokenizer_config.json`, `chat_template.jinja` | byte-level BPE with Qwen 3.5's pre-tokenizer and added tokens; Qwen 3.5's official chat template |",
           "| `LICENSE-Apache-2.0.txt` | the licence of Qwen's chat template |"]
    if ref:
        out.append(f"| `greedy_reference.json` | {len(ref['greedy_ids'])} greedy tokens of transformers in float64 for "
                   f"`{ref['prompt_text']!r}`, smallest top-1 − top-2 margin {ref['min_margin']}: the engine tests' reference |")
    out += ["", "## Architecture", "", "| | |", "|---|---|",
            f"| layers | {cfg['num_hidden_layers']}: Gated DeltaNet : gated attention = 3 : 1 ({plural(n_attn, 'attention layer')}) |",
            f"| hidden size / MLP | {cfg['hidden_size']} / SwiGLU {cfg['intermediate_size']} |",
            f"| gated attention | {plural(cfg['num_attention_heads'], 'query head')}, {plural(cfg['num_key_value_heads'], 'KV head')}, head dim {cfg['head_dim']}, "
            f"RoPE on {int(cfg['head_dim'] * cfg['rope_parameters']['partial_rotary_factor'])} dims, θ = {cfg['rope_parameters']['rope_theta']:.0e} |",
            f"| Gated DeltaNet | {plural(cfg['linear_num_key_heads'], 'key head')} < {plural(cfg['linear_num_value_heads'], 'value head')}, key/value head dim "
            f"{cfg['linear_key_head_dim']}/{cfg['linear_value_head_dim']}, conv kernel {cfg['linear_conv_kernel_dim']} |",
            f"| embeddings | {cfg['vocab_size']:,} × {cfg['hidden_size']}, tied with the output head |",
            f"| parameters | **{metrics['parameters']:,}** (MTP block included) |", "",
            "## Training", "",
            f"`tools/train_demo/train.py` (`--size {metrics['size']}`), one run on {metrics['device']}"
            + (f", continuing from the weights with sha256 `{metrics['init']['sha256'][:16]}…` (`--init`, peak learning rate "
               f"{metrics['hyper'].get('peak_lr', '?')}; earlier runs' records are in git history)" if metrics.get("init") else "")
            + f" (torch {metrics['versions']['torch']}, "
            f"transformers {metrics['versions']['transformers']}): {metrics['steps']:,} planned steps of {metrics['batch']} × "
            f"{metrics['seq_len']:,} tokens, {metrics['tokens_seen'] / 1e6:.1f} M tokens seen ({metrics['epochs']:.2g} passes over "
            f"{metrics['train_tokens'] / 1e6:.2f} M training tokens) in {metrics['train_seconds']:.0f} s "
            f"({metrics['tokens_seen'] / max(metrics['train_seconds'], 1e-9):,.0f} tokens/s); "
            + (f"the last weights kept (step {metrics['best_step']:,}" if metrics["hyper"].get("select") == "last" else
               f"weights of step {metrics['best_step']:,} kept (lowest validation objective")
            + (f"; stopped early: {metrics['stop_reason']}" if metrics.get("stopped_early") else "") + "). "
            f"Loss = role-weighted next-token CE (conversation prompts × {metrics['hyper']['prompt_weight']}) + "
            f"{metrics['hyper']['mtp_weight']} × MTP (t+2) CE"
            + unlikelihood_sentence(metrics) + f". Data: {data['train_tokens'] / 1e6:.2f} M training tokens, "
            f"{data['val_tokens'] / 1e3:.0f} k validation, {data['test_tokens'] / 1e3:.0f} k held-back test; sources and "
            "licences in `tools/train_demo/DATA.md`; record in `tools/train_demo/runs/" + name + "/`.", "",
            "## Evaluation (held-back test documents)", ""]
    if evals:
        out += ["Each model scores the same test documents with its own tokenizer, float32 arithmetic on the weights as "
                "stored (`tools/train_demo/evaluate.py`), in 1,024-token windows (the tail shorter than a window is left "
                "out). Perplexities are per own token; bits per byte compares models with different tokenizers. MTP acceptance is teacher-forced: how often the MTP head's top token for t+2 "
                f"equals the main head's top token at t+1 (goal ≥ {MTP_GOAL:.0%}); after a miss: the same at the positions right after "
                "one whose draft would be rejected.", "",
                "| model | tokens | perplexity | bits per byte | reply perplexity | MTP acceptance (replies) | after a miss |",
                "|---|---|---|---|---|---|---|"]
        for e in evals:
            goal = "" if e is not evals[0] else (" ✓" if e["mtp_accept"] >= MTP_GOAL else " (below the goal)")
            reply_ppl = "–" if e["reply_ppl"] is None else f"{e['reply_ppl']:.2f}"
            reply_accept = "–" if e["mtp_accept_reply"] is None else f"{100 * e['mtp_accept_reply']:.1f}%"
            out.append(f"| `{Path(e['model']).name}` | {e['tokens']:,} | {e['ppl']:.2f} | {e['bits_per_byte']:.3f} | "
                       f"{reply_ppl} | {100 * e['mtp_accept']:.1f}%{goal} ({reply_accept}) | {after_miss(e)} |")
        by = evals[0].get("ppl_by_source", {})
        toks = evals[0].get("tokens_by_source", {})
        out += ["", "Perplexity of this model by source: " + ", ".join(f"{s} {p:.1f} ({toks.get(s, 0):,})" for s, p in by.items()) + "."]
    else:
        out.append(f"{todo} (`tools/train_demo/evaluate.py`).")
    spec = load(record / "speculative.json")
    if spec:
        out += ["", "## MTP speculative greedy decoding (qwenrt)", "",
                "`qwenrt bench --speculative mtp --draft-tokens 4 --fixed-draft` on text the model never saw: Debian's "
                "licence texts and the start of the held-back test slice (segments of 128-token prompts spread over the text, "
                "48 greedy tokens each; the tokens equal plain decoding's by construction, and the benchmark checks it). "
                "Acceptance at draft position i counts the rounds whose first i − 1 drafts were accepted; position 1 is the "
                "speculative counterpart of the teacher-forced acceptance above (the goal for both: 60%). A round starts right "
                "after the position whose draft the last round rejected, and misses come in runs, so position 1 follows the "
                "teacher-forced acceptance after a miss (the table above) rather than the average.", "",
                "| text | segments | main-model steps | tokens per step | accepted / drafted at positions 1, 2, 3, 4 | position 1 |",
                "|---|---|---|---|---|---|"]
        for r in spec:
            pairs = ", ".join(f"{a}/{d}" for a, d in zip(r["accepted_per_position"], r["drafted_per_position"]))
            first = r["accepted_per_position"][0] / max(r["drafted_per_position"][0], 1)
            out.append(f"| `{Path(r['text']).name}` | {r['segments']} | {r['steps']} | {(r['steps'] + r['accepted']) / r['steps']:.2f} | "
                       f"{pairs} | {100 * first:.1f}% |")
    out += ["", "## Parity with transformers", ""]
    if parity:
        out += ["`tools/train_demo/check_parity.py`: qwenrt's logits at every position against transformers in float64:", ""]
        for p in parity:
            out.append(f"- {p['tokens']}-token prompt `{p['prompt'][:50]}…`: relative L2 {p['rel_l2_vs_f64']:.1e} "
                       f"(transformers float32: {p['f32_vs_f64']:.1e}); greedy tokens equal {p['greedy_equal']}/{p['greedy_compared']}")
    else:
        out.append(f"{todo} (`finalize.py --qwenrt BIN`).")
    out += ["", "## Speed", ""]
    if cpu:
        out.append(f"- CPU ({cpu_name()}, {cpu.get('threads', '?')} threads): decode {cpu['decode_tok_s']:.1f} tokens/s, prefill "
                   f"{cpu['prefill_tok_s']:.0f} tokens/s (`qwenrt bench --prompt-tokens 512 --gen-tokens 128`).")
    else:
        out.append(f"- CPU: {todo} (`finalize.py --qwenrt BIN`).")
    if gpu and isinstance(gpu.get("bench"), dict) and "decode_tok_s" in gpu["bench"]:
        out.append(f"- GPU ({gpu['gpu']}): decode {gpu['bench']['decode_tok_s']:.1f} tokens/s, prefill {gpu['bench']['prefill_tok_s']:.0f} "
                   f"tokens/s; `--device cuda` greedy tokens equal the float64 reference: {gpu['greedy_equal']}; logits vs the CPU "
                   f"path: relative L2 {gpu['logits_rel_l2_cuda_vs_cpu']:.1e} (`tools/train_demo/gpu_model_check.sh`).")
    else:
        out.append(f"- GPU: {todo} (`tools/train_demo/gpu_model_check.sh` on the GPU machine, then `finalize.py --gpu-check DIR`).")
    out += ["", "## Default options", ""]
    if run:
        out += [f"`qwenrt run -p {run_prompt(record)!r} --seed 1` (thinking on, as the template defaults; sampling from "
                "generation_config.json). Reasoning (stderr):", "", "```text", run["reasoning"].strip(), "```", "", "Answer (stdout):",
                "", "```text", run["text"].strip(), "```"]
    else:
        out.append(f"{todo} (`finalize.py --qwenrt BIN`).")
    loops = load(record / "loops.json")
    out += ["", "## Greedy decoding: loops and closed reasoning", ""]
    if loops:
        looping = sum(1 for r in loops if r["loop_period"])
        out += [f"`tools/train_demo/loop_check.py`: greedy decoding by qwenrt, up to 200 tokens, of {len({r['question'] for r in loops})} "
                "questions (the samples' and ones no sample shows), with and without thinking; a loop is a period of at most 16 tokens "
                f"repeated 4 times at the end. **{looping} of {len(loops)} outputs loop.**", "",
                "| question | thinking | tokens | short loop | think block closed |", "|---|---|---|---|---|"]
        for r in loops:
            out.append(f"| {r['question']} | {'yes' if r['thinking'] else 'no'} | {r['tokens']} | "
                       f"{'period ' + str(r['loop_period']) if r['loop_period'] else 'none'} | "
                       f"{'' if r['closes_think'] is None else ('yes' if r['closes_think'] else 'no')} |")
    else:
        out.append(f"{todo} (`finalize.py --qwenrt BIN`).")
    aside = load(record / "loops_kept_aside.json")
    if aside:
        looping = [r for r in aside if r["loop_period"]]
        listed = "; ".join(f"{r['question']} ({'thinking' if r['thinking'] else 'no thinking'}, period {r['loop_period']})" for r in looping)
        out += ["", f"The {len({r['question'] for r in aside})} questions kept aside for judging training runs "
                "(`tools/train_demo/kept_aside_questions.txt`), the same way: "
                f"**{len(looping)} of {len(aside)} outputs loop**" + (f": {listed}." if looping else ".")]
    samples = record / "samples.md"
    out += ["", "## Samples", "", samples.read_text().strip() if samples.exists() else
            f"{todo} (`tools/train_demo/samples.py --model models/{name} --qwenrt BIN > tools/train_demo/runs/{name}/samples.md`)."]
    return "\n".join(out) + "\n"


def after_miss(e: dict) -> str:
    return "–" if e.get("mtp_accept_after_miss") is None else f"{100 * e['mtp_accept_after_miss']:.1f}%"


def unlikelihood_sentence(metrics: dict) -> str:
    """The unlikelihood updates of the run, and the loop rates of its first and final weights."""
    h, loops = metrics["hyper"], metrics.get("loops")
    text = ""
    if h.get("unlikelihood_every"):
        u = h["unlikelihood"]
        every = "every step" if h["unlikelihood_every"] == 1 else f"every {h['unlikelihood_every']} steps"
        text += (f"; after {every} one more update with the sequence-level unlikelihood "
                 f"loss (Welleck et al. 2019; `tools/train_demo/unlikelihood.py`): {u['batch']} training contexts of {u['prefix']} "
                 f"tokens, the model's own {u['continuation']}-token greedy continuations, −log(1 − p) on every token of a "
                 f"{u['ngram']}-gram the continuation already produced")
    if loops:
        text += (f". Greedy continuations (200 tokens) of {loops['start']['prompts']} held-back test contexts that end in a "
                 f"short loop: {100 * loops['start']['loop_rate']:.1f}% with the starting weights, "
                 f"{100 * loops['final']['loop_rate']:.1f}% with these (repeated 4-grams {100 * loops['start']['repeat_4gram']:.1f}% "
                 f"→ {100 * loops['final']['repeat_4gram']:.1f}%)")
    return text


def run_prompt(record: Path) -> str:
    from finalize import RUN_PROMPT
    return RUN_PROMPT


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", type=Path, required=True)
    ap.add_argument("--record", type=Path, required=True)
    args = ap.parse_args()
    (args.model / "README.md").write_text(card(args.model, args.record))
    print(f"wrote {args.model / 'README.md'}")


if __name__ == "__main__":
    main()
