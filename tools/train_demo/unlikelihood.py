"""Sequence-level unlikelihood training against greedy loops, and the loop rate it is judged by.

Why: a small model trained by maximum likelihood alone falls into short loops under greedy decoding
("the sons of Jabin, the sons of Jabin, ..."): issue 30 asks that greedy output does not, within 200
tokens. More passes over the same 18 M tokens do not cure it (the second 16m run: loops on 12 of 60
unseen questions). Welleck et al. 2019 ("Neural text generation with unlikelihood training", ICLR
2020, section 5.2) fine-tune on the model's own greedy continuations: every continuation token that
belongs to an n-gram the continuation has already produced gets the loss -log(1 - p(token)), which
pushes down exactly the repeats greedy decoding takes, while maximum-likelihood steps in between keep
the distribution elsewhere (their greedy 4-gram repeats fell from 44% to 13% at a small cost in
perplexity).

Prompts are the training stream's own contexts: PREFIX tokens ending where an assistant reply
starts (what `qwenrt run` asks the model to do) or, for a quarter of them, anywhere in plain text.
"""

from __future__ import annotations

import inspect

import torch
import torch.nn.functional as F

NGRAM = 4            # a repeated 4-gram marks its tokens (as in the paper)
PREFIX = 96          # context tokens before each continuation
CONTINUATION = 128   # greedy tokens per continuation in training
TEXT_FRACTION = 0.25  # prompts cut from plain text instead of before a reply
MAX_PERIOD = 16      # loop_period: the shortest loop period looked for ...
REPEATS = 4          # ... repeated this many times at the end of the output


def loop_period(tokens: list[int]) -> int | None:
    """The smallest period p <= MAX_PERIOD such that the last REPEATS * p tokens repeat with period p."""
    for p in range(1, MAX_PERIOD + 1):
        tail = tokens[-REPEATS * p:]
        if len(tail) == REPEATS * p and all(tail[i] == tail[i % p] for i in range(len(tail))):
            return p
    return None


def valid_lengths(tokens: torch.Tensor, stop_ids: list[int]) -> torch.Tensor:
    """[B] tokens of each continuation up to and including its first stop token (all if none)."""
    stops = torch.isin(tokens, torch.tensor(stop_ids, device=tokens.device))
    first = torch.where(stops.any(1), stops.int().argmax(1) + 1, torch.full_like(stops[:, 0], tokens.shape[1], dtype=torch.long))
    return first.long()


def repeat_mask(tokens: torch.Tensor, lengths: torch.Tensor, n: int = NGRAM) -> torch.Tensor:
    """[B, N] bool: the token lies in an n-gram that starts later than an equal n-gram of the same
    continuation (within its valid length). The first occurrence is never marked."""
    mask = torch.zeros(tokens.shape, dtype=torch.bool)
    for b, (row, length) in enumerate(zip(tokens.tolist(), lengths.tolist())):
        seen: set[tuple[int, ...]] = set()
        for s in range(length - n + 1):
            gram = tuple(row[s:s + n])
            if gram in seen:
                mask[b, s:s + n] = True
            else:
                seen.add(gram)
    return mask.to(tokens.device)


def prompt_ends(roles: torch.Tensor, reply_role: int, text_role: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Stream positions where a continuation may start: the first token of every assistant reply,
    and every plain-text token (both at least PREFIX tokens into the stream)."""
    reply = roles == reply_role
    starts = torch.nonzero(reply[1:] & ~reply[:-1]).flatten() + 1
    text = torch.nonzero(roles == text_role).flatten()
    limit = roles.numel() - CONTINUATION
    return starts[(starts >= PREFIX) & (starts < limit)], text[(text >= PREFIX) & (text < limit)]


def sample_prompts(stream: torch.Tensor, ends: tuple[torch.Tensor, torch.Tensor], count: int,
                   gen: torch.Generator) -> torch.Tensor:
    """[count, PREFIX] contexts: most end before a reply, TEXT_FRACTION inside plain text."""
    replies, text = ends
    n_text = round(count * TEXT_FRACTION) if text.numel() else 0
    pick = lambda pool, k: pool[torch.randint(pool.numel(), (k,), generator=gen).to(pool.device)]  # noqa: E731
    positions = torch.cat([pick(replies, count - n_text), pick(text, n_text)])
    return stream[positions[:, None] + torch.arange(-PREFIX, 0, device=stream.device)]


@torch.no_grad()
def greedy_continue(lm, prompts: torch.Tensor, steps: int) -> torch.Tensor:
    """[B, steps] argmax continuations of equal-length prompts, decoding with the model's cache.
    Runs to the full length; valid_lengths cuts each at its stop token."""
    was_training = lm.training
    lm.eval()
    # transformers renames past_key_values to cache (5.25 warns, 5.40 drops the old name).
    cache_arg = "cache" if "cache" in inspect.signature(lm.forward).parameters else "past_key_values"
    with torch.autocast(prompts.device.type, dtype=torch.bfloat16, enabled=prompts.device.type == "cuda"):
        out = lm(input_ids=prompts, use_cache=True)
        tokens = [out.logits[:, -1].argmax(-1)]
        for _ in range(steps - 1):
            cache = out.past_key_values if getattr(out, "past_key_values", None) is not None else out.cache
            out = lm(input_ids=tokens[-1][:, None], use_cache=True, **{cache_arg: cache})
            tokens.append(out.logits[:, -1].argmax(-1))
    lm.train(was_training)
    return torch.stack(tokens, 1)


def unlikelihood_loss(lm, prompts: torch.Tensor, continuation: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, float]:
    """-log(1 - p) of every repeated continuation token, averaged over the valid continuation
    tokens; also the fraction of them marked (the batch's repetition)."""
    mask = repeat_mask(continuation, lengths)
    valid = torch.arange(continuation.shape[1], device=continuation.device)[None, :] < lengths[:, None]
    sequence = torch.cat([prompts, continuation], 1)
    with torch.autocast(sequence.device.type, dtype=torch.bfloat16, enabled=sequence.device.type == "cuda"):
        logits = lm(input_ids=sequence[:, :-1], use_cache=False).logits[:, prompts.shape[1] - 1:]
    prob = F.softmax(logits.float(), -1).gather(-1, continuation[..., None]).squeeze(-1)
    penalty = -torch.log((1 - prob).clamp(min=1e-5)) * mask
    count = valid.sum().clamp(min=1)
    return penalty.sum() / count, (mask.sum() / count).item()


@torch.no_grad()
def loop_rate(lm, prompts: torch.Tensor, stop_ids: list[int], steps: int = 200, batch: int = 128) -> dict:
    """Greedy continuations of `prompts` for `steps` tokens: the fraction that end in a short loop
    (loop_check's test) and the fraction of repeated 4-grams (tokens marked by repeat_mask)."""
    loops, marked, total = 0, 0, 0
    for i in range(0, prompts.shape[0], batch):
        cont = greedy_continue(lm, prompts[i:i + batch], steps)
        lengths = valid_lengths(cont, stop_ids)
        for row, length in zip(cont.tolist(), lengths.tolist()):
            loops += loop_period(row[:length]) is not None
        marked += repeat_mask(cont, lengths).sum().item()
        total += lengths.sum().item()
    return {"prompts": prompts.shape[0], "tokens": steps, "loop_rate": loops / max(prompts.shape[0], 1),
            "repeat_4gram": marked / max(total, 1)}
