#!/usr/bin/env python3
"""Train the qwenrt demo model (Qwen 3.5 text model + one MTP block) and export it.

Usage:
    python3 tools/train_demo/train.py --out DIR --steps N            # deterministic: same seed, same N, same weights
    python3 tools/train_demo/train.py --out DIR --time-budget 510    # picks N from a short timing run, records it
    python3 tools/train_demo/train.py --out DIR --size tiny --steps 5 --device cpu   # smoke run

Inputs: tools/train_demo/data/ (make_tokenizer.py): train.npy.xz / val.npy.xz uint16 token streams,
val_docs.json, meta.json, tokenizer/. Output folder DIR: model.safetensors (released Qwen 3.5 names,
bf16 + f32 A_log / gated-norm weights), config.json, generation_config.json, metrics.json.

Recipe (see models/*/README.md for the numbers of the shipped run):
  * windows of SEQ_LEN+1 tokens cut from the packed training stream; each epoch uses a new random
    offset and a new order of the non-overlapping windows (seeded);
  * loss = main next-token CE + MTP_WEIGHT * MTP CE (token t+2 from the final hidden at t and the
    embedding of token t+1); the MTP gradient also reaches the trunk, as in DeepSeek-V3's MTP;
  * AdamW (betas 0.9/0.95, weight decay on matrices only), linear warm-up then cosine decay to
    10% of the peak rate, gradient clipping at 1.0, bf16 autocast over float32 master weights;
  * --time-budget: the number of steps that fit the budget, at most MAX_EPOCHS passes;
  * every EVAL_EVERY steps the main loss on a fixed slice of the validation stream; the weights with
    the lowest value are kept (early stopping: ~12 passes over a 13 M-token corpus can overfit);
  * the kept weights are rounded to the checkpoint dtypes before the final metrics, so the numbers
    describe the shipped file.

Determinism: initialisation runs on the CPU from --seed, the data order from --seed, and CUDA runs
with deterministic algorithms where PyTorch has them (warn_only: anything else is logged). The
number of steps is the only machine-dependent choice, and only with --time-budget.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import sys
import time
import warnings
from pathlib import Path

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")   # deterministic cuBLAS
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import numpy as np  # noqa: E402
import torch  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import qwen35_demo as demo  # noqa: E402
from make_tokenizer import load_stream  # noqa: E402

SEQ_LEN = 1024
BATCH = 64            # windows per step: 65,536 tokens
PEAK_LR = 2e-3
MIN_LR_RATIO = 0.1
WARMUP_FRACTION = 0.03
WEIGHT_DECAY = 0.1
MTP_WEIGHT = 0.3
EVAL_EVERY = 100
MAX_EPOCHS = 12       # --time-budget never plans more passes over the data than this
SELECT_WINDOWS = 64   # validation windows used to pick the best weights during training


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


# ---------------------------------------------------------------------------------------------
# Data


class WindowSampler:
    """Batches of SEQ_LEN+1-token windows; each epoch a new offset and order of the windows."""

    def __init__(self, stream: torch.Tensor, length: int, batch: int, seed: int):
        self.stream, self.length, self.batch = stream, length, batch
        self.gen = torch.Generator().manual_seed(seed)
        self.order: list[int] = []
        self.epoch = 0

    def _new_epoch(self) -> None:
        offset = int(torch.randint(self.length, (1,), generator=self.gen))
        starts = torch.arange(offset, self.stream.numel() - self.length - 1, self.length)
        self.order = starts[torch.randperm(starts.numel(), generator=self.gen)].tolist()
        self.epoch += 1

    def next(self) -> torch.Tensor:
        if len(self.order) < self.batch:
            self._new_epoch()
        starts, self.order = self.order[:self.batch], self.order[self.batch:]
        idx = torch.tensor(starts, device=self.stream.device)[:, None] + torch.arange(self.length + 1, device=self.stream.device)
        return self.stream[idx]


def eval_windows(stream: torch.Tensor, length: int) -> torch.Tensor:
    """Start offsets of non-overlapping windows: every token after the first is a target once."""
    return torch.arange(0, stream.numel() - length - 1, length)


# ---------------------------------------------------------------------------------------------
# Evaluation


@torch.no_grad()
def evaluate(model: demo.DemoModel, stream: torch.Tensor, length: int, batch: int, windows: int | None = None,
             token_source: torch.Tensor | None = None, n_sources: int = 0, bf16: bool = True) -> dict:
    """Main-head NLL, MTP-head NLL / top-1 accuracy, and MTP agreement with the main head.

    'mtp_accept' is the greedy draft-acceptance proxy: how often the MTP head's top token for
    x[t+2] (from h[t] and the true x[t+1]) equals the main head's top token at t+1.
    """
    model.eval()
    starts = eval_windows(stream, length)
    if windows is not None:
        starts = starts[:windows]
    sums = {"nll": 0.0, "n": 0, "mtp_nll": 0.0, "mtp_n": 0, "mtp_top1": 0, "mtp_accept": 0, "top1": 0}
    src_nll = torch.zeros(max(n_sources, 1), dtype=torch.float64)
    src_n = torch.zeros(max(n_sources, 1), dtype=torch.float64)
    ar = torch.arange(length + 1, device=stream.device)
    for i in range(0, starts.numel(), batch):
        s = starts[i:i + batch].to(stream.device)
        window = stream[s[:, None] + ar]
        with torch.autocast(stream.device.type, dtype=torch.bfloat16, enabled=bf16 and stream.device.type == "cuda"):
            out = model(window)
        logits, mtp_logits = out["logits"].float(), out["mtp_logits"].float()
        nll = torch.nn.functional.cross_entropy(logits.flatten(0, 1), window[:, 1:].flatten(), reduction="none")
        mtp_nll = torch.nn.functional.cross_entropy(mtp_logits.flatten(0, 1), window[:, 2:].flatten(), reduction="none")
        main_top = logits.argmax(-1)
        mtp_top = mtp_logits.argmax(-1)
        sums["nll"] += nll.double().sum().item()
        sums["n"] += nll.numel()
        sums["top1"] += (main_top == window[:, 1:]).sum().item()
        sums["mtp_nll"] += mtp_nll.double().sum().item()
        sums["mtp_n"] += mtp_nll.numel()
        sums["mtp_top1"] += (mtp_top == window[:, 2:]).sum().item()
        sums["mtp_accept"] += (mtp_top == main_top[:, 1:]).sum().item()
        if token_source is not None:
            src = token_source[(s[:, None] + ar[1:]).cpu()].flatten()
            src_nll.index_add_(0, src, nll.double().cpu())
            src_n.index_add_(0, src, torch.ones_like(src, dtype=torch.float64))
    model.train()
    result = {
        "tokens": sums["n"],
        "loss": sums["nll"] / sums["n"],
        "ppl": math.exp(sums["nll"] / sums["n"]),
        "top1": sums["top1"] / sums["n"],
        "mtp_loss": sums["mtp_nll"] / sums["mtp_n"],
        "mtp_ppl": math.exp(sums["mtp_nll"] / sums["mtp_n"]),
        "mtp_top1": sums["mtp_top1"] / sums["mtp_n"],
        "mtp_accept": sums["mtp_accept"] / sums["mtp_n"],
    }
    if token_source is not None:
        result["ppl_by_source"] = (src_nll / src_n.clamp(min=1)).exp().tolist()
        result["tokens_by_source"] = src_n.long().tolist()
    return result


# ---------------------------------------------------------------------------------------------
# Training


def make_optimizer(model: torch.nn.Module, device: torch.device) -> torch.optim.Optimizer:
    """AdamW; weight decay only on matrices (not norms, A_log, dt_bias)."""
    decay = [p for p in model.parameters() if p.ndim >= 2]
    no_decay = [p for p in model.parameters() if p.ndim < 2]
    groups = [{"params": decay, "weight_decay": WEIGHT_DECAY}, {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=PEAK_LR, betas=(0.9, 0.95), eps=1e-8, fused=device.type == "cuda")


def lr_at(step: int, steps: int) -> float:
    warmup = max(1, round(WARMUP_FRACTION * steps))
    if step < warmup:
        return PEAK_LR * (step + 1) / warmup
    progress = (step - warmup) / max(1, steps - warmup)
    return PEAK_LR * (MIN_LR_RATIO + (1 - MIN_LR_RATIO) * 0.5 * (1 + math.cos(math.pi * progress)))


def train_step(model, opt, window: torch.Tensor, lr: float) -> tuple[torch.Tensor, torch.Tensor]:
    for group in opt.param_groups:
        group["lr"] = lr
    with torch.autocast(window.device.type, dtype=torch.bfloat16, enabled=window.device.type == "cuda"):
        out = model(window)
    main, mtp = demo.losses(out, window)
    (main + MTP_WEIGHT * mtp).backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    opt.zero_grad(set_to_none=True)
    return main.detach(), mtp.detach()


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def calibrate_steps(args, dims, special_ids, train_stream, val_stream, device) -> tuple[int, dict]:
    """Time a few steps and one selection eval on a throwaway model; steps that fit the budget."""
    model = demo.build(dims, special_ids, args.seed).to(device)
    opt = make_optimizer(model, device)
    sampler = WindowSampler(train_stream, args.seq_len, args.batch, args.seed + 1)
    for _ in range(3):   # warm-up: kernel selection, allocator
        train_step(model, opt, sampler.next(), 1e-4)
    sync(device)
    t0 = time.perf_counter()
    n = 10
    for _ in range(n):
        train_step(model, opt, sampler.next(), 1e-4)
    sync(device)
    step_time = (time.perf_counter() - t0) / n
    t0 = time.perf_counter()
    evaluate(model, val_stream, args.seq_len, args.batch, windows=SELECT_WINDOWS)
    sync(device)
    eval_time = time.perf_counter() - t0
    del model, opt
    if device.type == "cuda":
        torch.cuda.empty_cache()
    per_step = step_time + eval_time / args.eval_every
    fit = max(1, int(args.time_budget / per_step))
    # Past ~12 passes repeated data stops paying (Muennighoff et al. 2023, data-constrained
    # scaling); a faster machine then finishes early instead of overfitting.
    cap = int(MAX_EPOCHS * train_stream.numel() / (args.batch * args.seq_len))
    return min(fit, cap), {"step_s": step_time, "select_eval_s": eval_time, "steps_that_fit": fit, "epoch_cap": cap}


def main() -> None:
    here = Path(__file__).resolve().parent
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=here / "data")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--seed", type=int, default=20260)
    ap.add_argument("--steps", type=int, help="optimizer steps (deterministic run)")
    ap.add_argument("--time-budget", type=float, help="seconds for the training loop; picks --steps")
    ap.add_argument("--size", choices=sorted(demo.SIZES), default="demo")
    ap.add_argument("--seq-len", type=int, default=SEQ_LEN)
    ap.add_argument("--batch", type=int, default=BATCH)
    ap.add_argument("--eval-every", type=int, default=EVAL_EVERY)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--max-val-tokens", type=int, help="evaluate on a prefix of the validation stream (smoke runs)")
    ap.add_argument("--deadline", type=float, help="safety stop: leave the loop this many seconds after the start "
                                                   "(recorded as stopped_early; the run then no longer follows --steps)")
    args = ap.parse_args()
    if (args.steps is None) == (args.time_budget is None):
        ap.error("give exactly one of --steps and --time-budget")

    t_start = time.perf_counter()
    device = torch.device(args.device)
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.backends.cuda.matmul.allow_tf32 = True   # fp32 matmuls inside the DeltaNet chunk code
    torch.backends.cudnn.allow_tf32 = True
    warnings.filterwarnings("once")

    meta = json.loads((args.data / "meta.json").read_text())
    special_ids = meta["special_ids"]
    dims = demo.Dims(vocab_size=meta["vocab_size"], **demo.SIZES[args.size])
    train_stream = torch.from_numpy(load_stream(args.data / "train.npy.xz").astype(np.int64)).to(device)
    val_stream = torch.from_numpy(load_stream(args.data / "val.npy.xz").astype(np.int64)).to(device)
    if args.max_val_tokens:
        val_stream = val_stream[:args.max_val_tokens]
    spans = json.loads((args.data / "val_docs.json").read_text())
    sources = sorted({s for s, _, _ in spans})
    token_source = torch.zeros(val_stream.numel(), dtype=torch.long)
    for s, a, b in spans:
        token_source[a:min(b, val_stream.numel())] = sources.index(s)
    log(f"device {device} ({torch.cuda.get_device_name(device) if device.type == 'cuda' else 'cpu'}), "
        f"torch {torch.__version__}, transformers {__import__('transformers').__version__}")
    log(f"train {train_stream.numel():,} tokens, val {val_stream.numel():,} tokens, dims {dims}")

    calibration = None
    steps = args.steps
    if steps is None:
        steps, calibration = calibrate_steps(args, dims, special_ids, train_stream, val_stream, device)
        log(f"calibration {calibration} -> {steps} steps")

    model = demo.build(dims, special_ids, args.seed).to(device)
    n_params = sum(v.numel() for v in demo.checkpoint_tensors(model).values())
    opt = make_optimizer(model, device)
    sampler = WindowSampler(train_stream, args.seq_len, args.batch, args.seed + 1)
    log(f"{n_params:,} parameters; {steps} steps of {args.batch}x{args.seq_len} tokens")

    history, best = [], {"loss": float("inf"), "step": -1, "state": None}
    t_loop = time.perf_counter()
    stopped_early = None
    for step in range(steps):
        main, mtp = train_step(model, opt, sampler.next(), lr_at(step, steps))
        last = step + 1 == steps
        if args.deadline and not last and (step + 1) % 20 == 0 and time.perf_counter() - t_start > args.deadline:
            stopped_early, last = step + 1, True
            log(f"deadline reached: stopping after step {step + 1} of {steps}")
        if (step + 1) % 20 == 0 or last:
            elapsed = time.perf_counter() - t_loop
            history.append({"step": step + 1, "loss": main.item(), "mtp_loss": mtp.item(), "lr": lr_at(step, steps),
                            "epoch": sampler.epoch, "elapsed_s": elapsed})
            log(f"step {step + 1}/{steps} loss {main.item():.4f} mtp {mtp.item():.4f} lr {lr_at(step, steps):.2e} "
                f"epoch {sampler.epoch} {(step + 1) * args.batch * args.seq_len / elapsed:,.0f} tok/s")
        if (step + 1) % args.eval_every == 0 or last:
            sel = evaluate(model, val_stream, args.seq_len, args.batch, windows=SELECT_WINDOWS)
            history.append({"step": step + 1, "select_val_loss": sel["loss"], "select_val_mtp_top1": sel["mtp_top1"]})
            if sel["loss"] < best["loss"]:
                best = {"loss": sel["loss"], "step": step + 1,
                        "state": {k: v.detach().clone() for k, v in model.state_dict().items()}}
            log(f"  select-val loss {sel['loss']:.4f} (ppl {sel['ppl']:.2f}) mtp top1 {sel['mtp_top1']:.3f} "
                f"best @ {best['step']}")
        if stopped_early:
            break
    sync(device)
    train_seconds = time.perf_counter() - t_loop
    steps_done = stopped_early or steps

    model.load_state_dict(best["state"])
    demo.round_to_checkpoint_dtypes(model)
    torch.backends.cuda.matmul.allow_tf32 = False   # full float32 for the reported numbers
    # Float32 arithmetic (no autocast) for the reported numbers, as qwenrt computes.
    final = evaluate(model, val_stream, args.seq_len, args.batch, token_source=token_source, n_sources=len(sources),
                     bf16=False)
    final["ppl_by_source"] = dict(zip(sources, final["ppl_by_source"]))
    final["tokens_by_source"] = dict(zip(sources, final["tokens_by_source"]))
    log(f"final (best step {best['step']}, checkpoint dtypes): {json.dumps(final)}")

    args.out.mkdir(parents=True, exist_ok=True)
    demo.save_checkpoint(model, args.out / "model.safetensors")
    (args.out / "config.json").write_text(json.dumps(demo.config_json(model.config), indent=2) + "\n")
    (args.out / "generation_config.json").write_text(json.dumps(demo.generation_config_json(special_ids), indent=2) + "\n")
    metrics = {
        "seed": args.seed, "steps": steps, "stopped_early": stopped_early, "best_step": best["step"],
        "size": args.size, "dims": dims.__dict__,
        "parameters": n_params, "seq_len": args.seq_len, "batch": args.batch,
        "tokens_seen": steps_done * args.batch * args.seq_len, "train_tokens": train_stream.numel(),
        "epochs": steps_done * args.batch * args.seq_len / train_stream.numel(),
        "hyper": {"peak_lr": PEAK_LR, "min_lr_ratio": MIN_LR_RATIO, "warmup_fraction": WARMUP_FRACTION,
                  "weight_decay": WEIGHT_DECAY, "mtp_weight": MTP_WEIGHT, "eval_every": args.eval_every,
                  "select_windows": SELECT_WINDOWS},
        "calibration": calibration, "train_seconds": train_seconds,
        "total_seconds": time.perf_counter() - t_start, "val": final, "history": history,
        "versions": {"torch": torch.__version__, "transformers": __import__("transformers").__version__,
                     "python": sys.version.split()[0]},
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "model_sha256": hashlib.sha256((args.out / "model.safetensors").read_bytes()).hexdigest(),
    }
    (args.out / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n")
    log(f"wrote {args.out} in {metrics['total_seconds']:.0f} s")


if __name__ == "__main__":
    main()
