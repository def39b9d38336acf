#!/usr/bin/env python3
"""Train the qwenrt demo model (Qwen 3.5 text model + one MTP block) and export it.

Usage:
    python3 tools/train_demo/train.py --out DIR --steps N            # deterministic: same seed, same N, same weights
    python3 tools/train_demo/train.py --out DIR --time-budget 510    # picks N from a short timing run, records it
    python3 tools/train_demo/train.py --out DIR --size tiny --steps 5 --device cpu   # smoke run

Inputs: tools/train_demo/data/ (make_tokenizer.py): {train,val,test}.npy.xz uint16 token streams and
their .roles.npy.xz, {val,test}_docs.json, meta.json, tokenizer/. Output folder DIR: model.safetensors (released Qwen 3.5 names,
bf16 + f32 A_log / gated-norm weights), config.json, generation_config.json, metrics.json.

Recipe (see models/*/README.md for the numbers of the shipped run):
  * windows of SEQ_LEN+1 tokens cut from the packed training stream; each epoch uses a new random
    offset and a new order of the non-overlapping windows (seeded);
  * loss = main next-token CE + MTP_WEIGHT * MTP CE (token t+2 from the final hidden at t and the
    embedding of token t+1); the MTP gradient also reaches the trunk, as in DeepSeek-V3's MTP;
  * each predicted token's CE is weighted by its role: plain text and assistant replies 1,
    conversation prompts (template lines, system, user and tool turns) PROMPT_WEIGHT, so the
    model spends its capacity on answering rather than on predicting questions, yet still sees them;
  * AdamW (betas 0.9/0.95, weight decay on matrices only), linear warm-up then cosine decay to
    10% of the peak rate, gradient clipping at 1.0, bf16 autocast over float32 master weights;
  * --time-budget: the number of steps that fit the budget, at most MAX_EPOCHS passes;
  * every EVAL_EVERY steps the weighted main loss on a fixed slice of the validation stream; the
    weights with the lowest value are kept, and the run stops once PATIENCE evaluations in a row
    have not improved on it (early stopping: repeated passes over a small corpus overfit);
  * --unlikelihood-every K: after every K-th step, one more update on the model's own greedy
    continuations of training contexts with the sequence-level unlikelihood loss (unlikelihood.py:
    repeated 4-grams pushed down), the cure for greedy loops; such runs keep the last weights
    (--select last), since the validation objective alone would prefer the loops;
  * the loop rate (greedy continuations of held-back contexts ending in a short loop within 200
    tokens) of the starting and the final weights, on the test split;
  * the kept weights are rounded to the checkpoint dtypes before the final metrics, so the numbers
    describe the shipped file; they are measured on the held-back test split (the model card's
    slice, never used for selection) and on the validation split.

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
from dataclasses import dataclass
from pathlib import Path

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")   # deterministic cuBLAS
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import qwen35_demo as demo  # noqa: E402
import unlikelihood as ul  # noqa: E402
from make_tokenizer import load_stream  # noqa: E402

SEQ_LEN = 1024
BATCH = 64            # windows per step: 65,536 tokens
PEAK_LR = 2e-3
MIN_LR_RATIO = 0.1
WARMUP_FRACTION = 0.03
WEIGHT_DECAY = 0.1
MTP_WEIGHT = 0.3
PROMPT_WEIGHT = 0.1   # loss weight of conversation prompt tokens (plain text and replies: 1)
PATIENCE = 4          # evaluations without a better validation loss before the run stops
EVAL_EVERY = 100
MAX_EPOCHS = 12       # --time-budget never plans more passes over the data than this
SELECT_WINDOWS = 64   # validation windows used to pick the best weights during training
UL_BATCH = 128        # greedy continuations per unlikelihood step (--unlikelihood-batch)
SELECT_LOOP_PROMPTS = 128   # validation prompts whose greedy loop rate every evaluation logs (unlikelihood runs)


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
        """Token positions [batch, length+1] of the next windows (index the stream and its roles)."""
        if len(self.order) < self.batch:
            self._new_epoch()
        starts, self.order = self.order[:self.batch], self.order[self.batch:]
        return torch.tensor(starts, device=self.stream.device)[:, None] + torch.arange(self.length + 1, device=self.stream.device)


def role_weights(roles: torch.Tensor, prompt_role: int) -> torch.Tensor:
    """Loss weight of predicting each token: PROMPT_WEIGHT for conversation prompts, else 1."""
    return torch.where(roles == prompt_role, PROMPT_WEIGHT, 1.0).float()


def eval_windows(stream: torch.Tensor, length: int) -> torch.Tensor:
    """Start offsets of non-overlapping windows: every token after the first is a target once."""
    return torch.arange(0, stream.numel() - length - 1, length)


# ---------------------------------------------------------------------------------------------
# Evaluation


@dataclass
class Split:
    """A token stream, the role of each token, and (for held-out splits) each token's source."""
    stream: torch.Tensor
    roles: torch.Tensor
    token_source: torch.Tensor | None = None
    sources: list[str] | None = None
    token_bytes: torch.Tensor | None = None   # [vocab] UTF-8 bytes of each token (bits per byte)


def load_split(data: Path, name: str, device: torch.device, max_tokens: int | None = None) -> Split:
    stream = torch.from_numpy(load_stream(data / f"{name}.npy.xz").astype(np.int64))
    roles = torch.from_numpy(load_stream(data / f"{name}.roles.npy.xz").astype(np.int64))
    if max_tokens:
        stream, roles = stream[:max_tokens], roles[:max_tokens]
    split = Split(stream.to(device), roles.to(device))
    if (data / f"{name}_docs.json").exists():
        spans = json.loads((data / f"{name}_docs.json").read_text())
        split.sources = sorted({s for s, _, _ in spans})
        split.token_source = torch.zeros(stream.numel(), dtype=torch.long)
        for s, a, b in spans:
            split.token_source[a:min(b, stream.numel())] = split.sources.index(s)
    return split


@torch.no_grad()
def evaluate(model: demo.DemoModel, split: Split, length: int, batch: int, reply_role: int, prompt_role: int,
             windows: int | None = None, bf16: bool = True) -> dict:
    """Main-head NLL over every token and over assistant replies, the training objective (role-
    weighted NLL), MTP-head NLL / top-1, and MTP agreement with the main head.

    'mtp_accept' is the teacher-forced draft acceptance: how often the MTP head's top token for
    x[t+2] (from h[t] and the true x[t+1]) equals the main head's top token at t+1, i.e. how often
    a greedy speculative step would keep the draft (given the main model's token t+1 is right).
    'mtp_accept_after_miss' is the same at the positions right after one whose draft would be
    rejected: where a speculative round starts after a rejection, so its first draft position sees
    this rate more often than the average (misses come in runs).
    """
    model.eval()
    stream, roles = split.stream, split.roles
    starts = eval_windows(stream, length)
    if windows is not None:
        starts = starts[:windows]
    keys = ("bytes", "nll", "n", "w_nll", "w", "r_nll", "r_n", "top1", "mtp_nll", "mtp_n", "mtp_top1", "mtp_accept", "r_accept", "r_mtp_n",
            "misses", "accept_after_miss")
    sums = dict.fromkeys(keys, 0.0)
    n_sources = len(split.sources or []) or 1
    src_nll = torch.zeros(n_sources, dtype=torch.float64)
    src_n = torch.zeros(n_sources, dtype=torch.float64)
    ar = torch.arange(length + 1, device=stream.device)
    for i in range(0, starts.numel(), batch):
        idx = starts[i:i + batch].to(stream.device)[:, None] + ar
        window, role = stream[idx], roles[idx]
        with torch.autocast(stream.device.type, dtype=torch.bfloat16, enabled=bf16 and stream.device.type == "cuda"):
            out = model(window)
        logits, mtp_logits = out["logits"].float(), out["mtp_logits"].float()
        nll = F.cross_entropy(logits.flatten(0, 1), window[:, 1:].flatten(), reduction="none")
        mtp_nll = F.cross_entropy(mtp_logits.flatten(0, 1), window[:, 2:].flatten(), reduction="none")
        main_top, mtp_top = logits.argmax(-1), mtp_logits.argmax(-1)
        w = role_weights(role, prompt_role)[:, 1:].flatten()
        reply = (role[:, 1:] == reply_role).flatten()
        reply2 = (role[:, 2:] == reply_role).flatten()
        accept_rows = mtp_top == main_top[:, 1:]
        accept = accept_rows.flatten()
        missed = ~accept_rows[:, :-1]
        sums["misses"] += missed.sum().item()
        sums["accept_after_miss"] += (accept_rows[:, 1:] & missed).sum().item()
        sums["nll"] += nll.double().sum().item()
        sums["n"] += nll.numel()
        if split.token_bytes is not None:
            sums["bytes"] += split.token_bytes.to(window.device)[window[:, 1:]].sum().item()
        sums["w_nll"] += (nll * w).double().sum().item()
        sums["w"] += w.double().sum().item()
        sums["r_nll"] += nll[reply].double().sum().item()
        sums["r_n"] += reply.sum().item()
        sums["top1"] += (main_top == window[:, 1:]).sum().item()
        sums["mtp_nll"] += mtp_nll.double().sum().item()
        sums["mtp_n"] += mtp_nll.numel()
        sums["mtp_top1"] += (mtp_top == window[:, 2:]).sum().item()
        sums["mtp_accept"] += accept.sum().item()
        sums["r_accept"] += accept[reply2].sum().item()
        sums["r_mtp_n"] += reply2.sum().item()
        if split.token_source is not None:
            src = split.token_source[idx[:, 1:].cpu()].flatten()
            src_nll.index_add_(0, src, nll.double().cpu())
            src_n.index_add_(0, src, torch.ones_like(src, dtype=torch.float64))
    model.train()
    div = lambda a, b: sums[a] / max(sums[b], 1)   # noqa: E731
    result = {
        "tokens": int(sums["n"]), "loss": div("nll", "n"), "ppl": math.exp(div("nll", "n")), "top1": div("top1", "n"),
        "objective": div("w_nll", "w"),
        "reply_tokens": int(sums["r_n"]), "reply_loss": div("r_nll", "r_n") if sums["r_n"] else None,
        "reply_ppl": math.exp(div("r_nll", "r_n")) if sums["r_n"] else None,
        "mtp_loss": div("mtp_nll", "mtp_n"), "mtp_ppl": math.exp(div("mtp_nll", "mtp_n")), "mtp_top1": div("mtp_top1", "mtp_n"),
        "mtp_accept": div("mtp_accept", "mtp_n"), "mtp_accept_reply": div("r_accept", "r_mtp_n") if sums["r_mtp_n"] else None,
        "mtp_accept_after_miss": div("accept_after_miss", "misses"),
    }
    if split.token_bytes is not None:
        result["bytes"] = int(sums["bytes"])
        result["bits_per_byte"] = sums["nll"] / math.log(2) / max(sums["bytes"], 1)
    if split.token_source is not None:
        scored = [i for i in range(len(split.sources)) if src_n[i] > 0]   # a prefix may leave sources out
        result["ppl_by_source"] = {split.sources[i]: math.exp(src_nll[i] / src_n[i]) for i in scored}
        result["tokens_by_source"] = {split.sources[i]: int(src_n[i]) for i in scored}
    return result


# ---------------------------------------------------------------------------------------------
# Training


def make_optimizer(model: torch.nn.Module, device: torch.device) -> torch.optim.Optimizer:
    """AdamW; weight decay only on matrices (not norms, A_log, dt_bias)."""
    decay = [p for p in model.parameters() if p.ndim >= 2]
    no_decay = [p for p in model.parameters() if p.ndim < 2]
    groups = [{"params": decay, "weight_decay": WEIGHT_DECAY}, {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=PEAK_LR, betas=(0.9, 0.95), eps=1e-8, fused=device.type == "cuda")


def lr_at(step: int, steps: int, peak: float = PEAK_LR) -> float:
    warmup = max(1, round(WARMUP_FRACTION * steps))
    if step < warmup:
        return peak * (step + 1) / warmup
    progress = (step - warmup) / max(1, steps - warmup)
    return peak * (MIN_LR_RATIO + (1 - MIN_LR_RATIO) * 0.5 * (1 + math.cos(math.pi * progress)))


def set_lr(opt: torch.optim.Optimizer, lr: float) -> None:
    for group in opt.param_groups:
        group["lr"] = lr


def apply_update(model, opt: torch.optim.Optimizer, loss: torch.Tensor) -> None:
    """Backward, clip the gradient norm at 1.0, step, clear."""
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    opt.zero_grad(set_to_none=True)


def train_step(model, opt, split: Split, idx: torch.Tensor, prompt_role: int, lr: float) -> tuple[torch.Tensor, torch.Tensor]:
    set_lr(opt, lr)
    window = split.stream[idx]
    with torch.autocast(window.device.type, dtype=torch.bfloat16, enabled=window.device.type == "cuda"):
        out = model(window)
    main, mtp = demo.losses(out, window, role_weights(split.roles[idx], prompt_role))
    apply_update(model, opt, main + MTP_WEIGHT * mtp)
    return main.detach(), mtp.detach()


def unlikelihood_step(model, opt, train: Split, ends, gen: torch.Generator, stop_ids: list[int], batch: int,
                      lr: float) -> tuple[torch.Tensor, float]:
    """One update of the sequence-level unlikelihood loss on `batch` greedy continuations."""
    set_lr(opt, lr)
    prompts = ul.sample_prompts(train.stream, ends, batch, gen)
    continuation = ul.greedy_continue(model.lm, prompts, ul.CONTINUATION)
    loss, repeated = ul.unlikelihood_loss(model.lm, prompts, continuation, ul.valid_lengths(continuation, stop_ids))
    apply_update(model, opt, loss)
    return loss.detach(), repeated


def loop_prompts(split: Split, roles: dict, count: int, seed: int) -> torch.Tensor:
    """A fixed set of `count` held-out contexts for the loop rate (most before a reply)."""
    ends = ul.prompt_ends(split.roles, roles["reply"], roles["text"])
    return ul.sample_prompts(split.stream, ends, count, torch.Generator().manual_seed(seed))


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def calibrate_steps(args, dims, special_ids, train: Split, val: Split, roles: dict, stop_ids: list[int],
                    ul_ends, val_loop_prompts: torch.Tensor | None, device) -> tuple[int, dict]:
    """Time a few steps and one selection eval on a throwaway model; steps that fit the budget."""
    model = demo.build(dims, special_ids, args.seed).to(device)
    opt = make_optimizer(model, device)
    sampler = WindowSampler(train.stream, args.seq_len, args.batch, args.seed + 1)
    for _ in range(3):   # warm-up: kernel selection, allocator
        train_step(model, opt, train, sampler.next(), roles["prompt"], 1e-4)
    sync(device)
    t0 = time.perf_counter()
    n = 10
    for _ in range(n):
        train_step(model, opt, train, sampler.next(), roles["prompt"], 1e-4)
    sync(device)
    step_time = (time.perf_counter() - t0) / n
    ul_time = 0.0
    if args.unlikelihood_every:
        gen = torch.Generator().manual_seed(args.seed + 2)
        unlikelihood_step(model, opt, train, ul_ends, gen, stop_ids, args.unlikelihood_batch, 1e-4)   # warm-up
        sync(device)
        t0 = time.perf_counter()
        for _ in range(2):
            unlikelihood_step(model, opt, train, ul_ends, gen, stop_ids, args.unlikelihood_batch, 1e-4)
        sync(device)
        ul_time = (time.perf_counter() - t0) / 2
    t0 = time.perf_counter()
    evaluate(model, val, args.seq_len, args.batch, roles["reply"], roles["prompt"], windows=SELECT_WINDOWS)
    if val_loop_prompts is not None:
        ul.loop_rate(model.lm, val_loop_prompts, stop_ids)
    sync(device)
    eval_time = time.perf_counter() - t0
    del model, opt
    if device.type == "cuda":
        torch.cuda.empty_cache()
    per_step = step_time + eval_time / args.eval_every + (ul_time / args.unlikelihood_every if args.unlikelihood_every else 0)
    fit = max(1, int(args.time_budget / per_step))
    # Past ~12 passes repeated data stops paying (Muennighoff et al. 2023, data-constrained
    # scaling); a faster machine then finishes early instead of overfitting.
    cap = int(MAX_EPOCHS * train.stream.numel() / (args.batch * args.seq_len))
    return min(fit, cap), {"step_s": step_time, "unlikelihood_step_s": ul_time, "select_eval_s": eval_time,
                           "steps_that_fit": fit, "epoch_cap": cap}


def main() -> None:
    here = Path(__file__).resolve().parent
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=here / "data")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--seed", type=int, default=20260)
    ap.add_argument("--steps", type=int, help="optimizer steps (deterministic run)")
    ap.add_argument("--time-budget", type=float, help="seconds for the training loop; picks --steps")
    ap.add_argument("--size", choices=sorted(demo.SIZES), default="demo16m")
    ap.add_argument("--seq-len", type=int, default=SEQ_LEN)
    ap.add_argument("--batch", type=int, default=BATCH)
    ap.add_argument("--eval-every", type=int, default=EVAL_EVERY)
    ap.add_argument("--patience", type=int, default=PATIENCE,
                    help="stop after this many evaluations without a better validation objective (0: never)")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--max-val-tokens", type=int, help="evaluate on a prefix of the held-out streams (smoke runs)")
    ap.add_argument("--init", type=Path, help="start from this model.safetensors (a shipped demo model) instead of random "
                                              "weights: a continued run, with a fresh optimizer and LR schedule")
    ap.add_argument("--peak-lr", type=float, default=PEAK_LR, help="the schedule's peak learning rate (lower for --init runs)")
    ap.add_argument("--unlikelihood-every", type=int, default=0, metavar="K",
                    help="after every K-th step one sequence-level unlikelihood update on greedy continuations (0: none)")
    ap.add_argument("--unlikelihood-batch", type=int, default=UL_BATCH, help="greedy continuations per unlikelihood update")
    ap.add_argument("--select", choices=("best", "last"), help="keep the weights with the best validation objective, or the "
                                                             "last ones (default: last with --unlikelihood-every, else best)")
    ap.add_argument("--loop-prompts", type=int, default=256, help="held-back contexts for the loop rate of the first and final weights")
    ap.add_argument("--deadline", type=float, help="safety stop: leave the loop this many seconds after the start "
                                                   "(recorded as stopped_early; the run then no longer follows --steps)")
    args = ap.parse_args()
    if (args.steps is None) == (args.time_budget is None):
        ap.error("give exactly one of --steps and --time-budget")
    if args.unlikelihood_every < 0:
        ap.error("--unlikelihood-every: 0 (off) or a positive step interval")
    args.select = args.select or ("last" if args.unlikelihood_every else "best")

    t_start = time.perf_counter()
    device = torch.device(args.device)
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.backends.cuda.matmul.allow_tf32 = True   # fp32 matmuls inside the DeltaNet chunk code
    torch.backends.cudnn.allow_tf32 = True
    warnings.filterwarnings("once")

    meta = json.loads((args.data / "meta.json").read_text())
    special_ids, roles = meta["special_ids"], meta["roles"]
    stop_ids = demo.generation_config_json(special_ids)["eos_token_id"]
    dims = demo.Dims(vocab_size=meta["vocab_size"], **demo.SIZES[args.size])
    train = load_split(args.data, "train", device)
    val = load_split(args.data, "val", device, args.max_val_tokens)
    test = load_split(args.data, "test", device, args.max_val_tokens)
    log(f"device {device} ({torch.cuda.get_device_name(device) if device.type == 'cuda' else 'cpu'}), "
        f"torch {torch.__version__}, transformers {__import__('transformers').__version__}")
    log(f"train {train.stream.numel():,} tokens, val {val.stream.numel():,}, test {test.stream.numel():,}; dims {dims}")

    ul_ends = ul.prompt_ends(train.roles, roles["reply"], roles["text"]) if args.unlikelihood_every else None
    val_loop_prompts = loop_prompts(val, roles, SELECT_LOOP_PROMPTS, 0) if args.unlikelihood_every else None
    calibration = None
    steps = args.steps
    if steps is None:
        steps, calibration = calibrate_steps(args, dims, special_ids, train, val, roles, stop_ids, ul_ends, val_loop_prompts, device)
        log(f"calibration {calibration} -> {steps} steps")

    model = demo.build(dims, special_ids, args.seed).to(device)
    init_sha256 = None
    if args.init:
        demo.load_checkpoint(model, args.init)
        init_sha256 = hashlib.sha256(args.init.read_bytes()).hexdigest()
        log(f"starting from {args.init} (sha256 {init_sha256})")
    n_params = sum(v.numel() for v in demo.checkpoint_tensors(model).values())
    opt = make_optimizer(model, device)
    sampler = WindowSampler(train.stream, args.seq_len, args.batch, args.seed + 1)
    log(f"{n_params:,} parameters; {steps} steps of {args.batch}x{args.seq_len} tokens"
        + (f", an unlikelihood update after every {args.unlikelihood_every}" if args.unlikelihood_every else ""))
    test_loop_prompts = loop_prompts(test, roles, args.loop_prompts, 1)
    loops = {"start": ul.loop_rate(model.lm, test_loop_prompts, stop_ids)}
    log(f"loop rate of the starting weights on {args.loop_prompts} test contexts: {loops['start']}")
    ul_gen = torch.Generator().manual_seed(args.seed + 2)
    ul_loss, ul_repeated = None, None

    history, best = [], {"objective": float("inf"), "step": -1, "state": None}
    t_loop = time.perf_counter()
    stopped_early, stop_reason, stale = None, None, 0
    for step in range(steps):
        main_loss, mtp_loss = train_step(model, opt, train, sampler.next(), roles["prompt"], lr_at(step, steps, args.peak_lr))
        if args.unlikelihood_every and (step + 1) % args.unlikelihood_every == 0:
            ul_loss, ul_repeated = unlikelihood_step(model, opt, train, ul_ends, ul_gen, stop_ids, args.unlikelihood_batch,
                                                        lr_at(step, steps, args.peak_lr))
        last = step + 1 == steps
        if args.deadline and not last and (step + 1) % 20 == 0 and time.perf_counter() - t_start > args.deadline:
            stopped_early, stop_reason, last = step + 1, "deadline", True
            log(f"deadline reached: stopping after step {step + 1} of {steps}")
        if (step + 1) % 20 == 0 or last:
            elapsed = time.perf_counter() - t_loop
            history.append({"step": step + 1, "loss": main_loss.item(), "mtp_loss": mtp_loss.item(), "lr": lr_at(step, steps, args.peak_lr),
                            "epoch": sampler.epoch, "elapsed_s": elapsed}
                           | ({"unlikelihood_loss": ul_loss.item(), "repeated": ul_repeated} if ul_loss is not None else {}))
            log(f"step {step + 1}/{steps} loss {main_loss.item():.4f} mtp {mtp_loss.item():.4f} lr {lr_at(step, steps, args.peak_lr):.2e} "
                f"epoch {sampler.epoch} {(step + 1) * args.batch * args.seq_len / elapsed:,.0f} tok/s"
                + (f" unlikelihood {ul_loss.item():.4f} repeated {ul_repeated:.3f}" if ul_loss is not None else ""))
        if (step + 1) % args.eval_every == 0 or last:
            sel = evaluate(model, val, args.seq_len, args.batch, roles["reply"], roles["prompt"], windows=SELECT_WINDOWS)
            history.append({"step": step + 1, "select_val_objective": sel["objective"], "select_val_loss": sel["loss"],
                            "select_val_reply_loss": sel["reply_loss"], "select_val_mtp_accept": sel["mtp_accept"]})
            if val_loop_prompts is not None:
                history[-1]["select_val_loops"] = ul.loop_rate(model.lm, val_loop_prompts, stop_ids)
                log(f"  val loops {history[-1]['select_val_loops']}")
            if sel["objective"] < best["objective"]:
                best = {"objective": sel["objective"], "step": step + 1,
                        "state": {k: v.detach().clone() for k, v in model.state_dict().items()}}
                stale = 0
            else:
                stale += 1
            log(f"  select-val objective {sel['objective']:.4f} loss {sel['loss']:.4f} reply {sel['reply_loss'] or float('nan'):.4f} "
                f"mtp accept {sel['mtp_accept']:.3f} best @ {best['step']}")
            if args.select == "best" and args.patience and stale >= args.patience and not last:
                stopped_early, stop_reason = step + 1, "patience"
                log(f"early stop: {stale} evaluations without improvement; keeping step {best['step']}")
        if stopped_early:
            break
    sync(device)
    train_seconds = time.perf_counter() - t_loop
    steps_done = stopped_early or steps

    if args.select == "last":
        best = {"objective": None, "step": steps_done, "state": model.state_dict()}
    model.load_state_dict(best["state"])
    demo.round_to_checkpoint_dtypes(model)
    loops["final"] = ul.loop_rate(model.lm, test_loop_prompts, stop_ids)
    log(f"loop rate of the final weights: {loops['final']}")
    torch.backends.cuda.matmul.allow_tf32 = False   # full float32 for the reported numbers
    # Float32 arithmetic (no autocast) for the reported numbers, as qwenrt computes.
    final = {name: evaluate(model, split, args.seq_len, args.batch, roles["reply"], roles["prompt"], bf16=False)
             for name, split in (("test", test), ("val", val))}
    log(f"final (best step {best['step']}, checkpoint dtypes): {json.dumps(final)}")

    args.out.mkdir(parents=True, exist_ok=True)
    demo.save_checkpoint(model, args.out / "model.safetensors")
    (args.out / "config.json").write_text(json.dumps(demo.config_json(model.config), indent=2) + "\n")
    (args.out / "generation_config.json").write_text(json.dumps(demo.generation_config_json(special_ids), indent=2) + "\n")
    metrics = {
        "seed": args.seed, "steps": steps, "stopped_early": stopped_early, "stop_reason": stop_reason,
        "best_step": best["step"], "size": args.size, "dims": dims.__dict__,
        "parameters": n_params, "seq_len": args.seq_len, "batch": args.batch,
        "tokens_seen": steps_done * args.batch * args.seq_len, "train_tokens": train.stream.numel(),
        "epochs": steps_done * args.batch * args.seq_len / train.stream.numel(),
        "init": {"path": str(args.init), "sha256": init_sha256} if args.init else None,
        "hyper": {"peak_lr": args.peak_lr, "min_lr_ratio": MIN_LR_RATIO, "warmup_fraction": WARMUP_FRACTION,
                  "weight_decay": WEIGHT_DECAY, "mtp_weight": MTP_WEIGHT, "prompt_weight": PROMPT_WEIGHT,
                  "eval_every": args.eval_every, "patience": args.patience, "select_windows": SELECT_WINDOWS,
                  "select": args.select, "unlikelihood_every": args.unlikelihood_every,
                  "unlikelihood": {"batch": args.unlikelihood_batch, "prefix": ul.PREFIX, "continuation": ul.CONTINUATION,
                                   "ngram": ul.NGRAM, "text_fraction": ul.TEXT_FRACTION} if args.unlikelihood_every else None},
        "loops": loops,
        "calibration": calibration, "train_seconds": train_seconds,
        "total_seconds": time.perf_counter() - t_start, "test": final["test"], "val": final["val"], "history": history,
        "versions": {"torch": torch.__version__, "transformers": __import__("transformers").__version__,
                     "python": sys.version.split()[0]},
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "model_sha256": hashlib.sha256((args.out / "model.safetensors").read_bytes()).hexdigest(),
    }
    (args.out / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n")
    log(f"wrote {args.out} in {metrics['total_seconds']:.0f} s")


if __name__ == "__main__":
    main()
