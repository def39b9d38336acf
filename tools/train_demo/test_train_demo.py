#!/usr/bin/env python3
"""Checks of the demo-model tooling that need no downloaded packages (CPU, a few seconds).

    python3 tools/train_demo/test_train_demo.py      # or with pytest, where it is installed

Needs torch, transformers, tokenizers and jinja2 (as the tools themselves) and the repository's
models/qwen35-demo-16m tokenizer (any Qwen 3.5 tokenizer folder would do).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import torch
from tokenizers import Tokenizer

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import chat_render  # noqa: E402
import conversations  # noqa: E402
import qwen35_demo as demo  # noqa: E402
import unlikelihood as ul  # noqa: E402
from make_tokenizer import ROLE_PROMPT, ROLE_REPLY, encode_stream  # noqa: E402
from qa_sources import QA, first_sentences  # noqa: E402

TOKENIZER = HERE.parents[1] / "models/qwen35-demo-16m"


def item(key: str) -> QA:
    return QA("wordnet_qa", key, 'What does "ark" mean?', '"ark" is a noun meaning a boat built by Noah.',
              'The user asks about "ark". I will give its meaning.', [("Give me an example.", 'Here is an example: "the ark".')],
              ("lookup_word", {"word": "ark"}, "ark (noun): a boat built by Noah"))


def conversation_of_shape(shape: str) -> tuple[list[dict], list[dict] | None]:
    key = next(f"k{i}" for i in range(1000) if conversations.shape_of(f"k{i}") == shape)
    return conversations.conversation(item(key), item(key + "n"))


def test_every_shape_renders_as_transformers_renders_it():
    from transformers import AutoTokenizer
    hf = AutoTokenizer.from_pretrained(TOKENIZER)
    render = chat_render.renderer(chat_render.find_template())
    for shape in ("thinking", "plain", "multi", "tool"):
        messages, tools = conversation_of_shape(shape)
        text = render(messages, tools=tools)
        assert text == hf.apply_chat_template(messages, tools=tools, tokenize=False), shape
        last = text.rsplit("<|im_start|>assistant\n", 1)[1]
        assert last.startswith("<think>\n") and "\n</think>\n\n" in last, shape   # the last turn's block is closed
        if shape == "tool":
            assert "<tool_call>\n<function=lookup_word>\n<parameter=word>\nark\n</parameter>\n</function>\n</tool_call>" in text
            assert "<|im_start|>user\n<tool_response>\nark (noun)" in text
        if shape == "plain":
            assert "<think>\n\n</think>\n\n" in text   # what enable_thinking=False prompts with


def test_every_shape_renders_as_qwenrt_renders_it():
    """`qwenrt template` (QWENRT, default build/dev/qwenrt) gives the same text; skipped without a binary."""
    import json
    import os
    import subprocess
    import tempfile
    binary = Path(os.environ.get("QWENRT", HERE.parents[1] / "build/dev/qwenrt"))
    if not binary.exists():
        print(f"skip: no qwenrt binary at {binary} (set QWENRT)")
        return
    render = chat_render.renderer(chat_render.find_template())
    for shape in ("thinking", "plain", "multi", "tool"):
        messages, tools = conversation_of_shape(shape)
        with tempfile.NamedTemporaryFile("w", suffix=".json") as req:
            json.dump({"messages": messages, **({"tools": tools} if tools else {})}, req)
            req.flush()
            out = subprocess.run([str(binary), "template", "--model", str(TOKENIZER), "--request", req.name],
                                 check=True, capture_output=True, text=True).stdout
        assert out == render(messages, tools=tools), shape


def test_roles_mark_assistant_replies_only():
    tok = Tokenizer.from_file(str(TOKENIZER / "tokenizer.json"))
    render = chat_render.renderer(chat_render.find_template())
    messages, _ = conversation_of_shape("thinking")
    doc = {"source": "t", "chat": True, "text": render(messages)}
    stream, roles, _ = encode_stream(tok, [doc, {"source": "p", "chat": False, "text": "Plain text."}])
    text_of = lambda role: tok.decode([int(t) for t, r in zip(stream, roles) if r == role], skip_special_tokens=False)  # noqa: E731
    reply = text_of(ROLE_REPLY)
    assert reply.startswith("<think>") and reply.endswith("<|im_end|><|endoftext|>")
    assert "What does" not in reply and "What does" in text_of(ROLE_PROMPT)
    assert (roles[-4:] == 0).all()   # plain text (and its <|endoftext|>) is ROLE_TEXT


def test_role_weighted_losses():
    torch.manual_seed(0)
    window = torch.randint(0, 11, (2, 7))
    out = {"logits": torch.randn(2, 6, 11), "mtp_logits": torch.randn(2, 5, 11)}
    plain = demo.losses(out, window)
    ones = demo.losses(out, window, torch.ones(2, 7))
    assert torch.allclose(plain[0], ones[0]) and torch.allclose(plain[1], ones[1])
    w = torch.zeros(2, 7)
    w[0, 3] = 1.0   # only token 3 of row 0 counts: main target at position 2, MTP target at 1
    main, mtp = demo.losses(out, window, w)
    expect_main = torch.nn.functional.cross_entropy(out["logits"][0, 2:3], window[0, 3:4])
    expect_mtp = torch.nn.functional.cross_entropy(out["mtp_logits"][0, 1:2], window[0, 3:4])
    assert torch.allclose(main, expect_main) and torch.allclose(mtp, expect_mtp)


def test_demo16m_has_the_released_heads_and_fits_32_mb():
    dims = demo.Dims(vocab_size=8192, **demo.SIZES["demo16m"])
    assert (dims.head_dim, dims.linear_key_head_dim, dims.linear_value_head_dim) == (256, 128, 128)
    assert dims.linear_num_key_heads < dims.linear_num_value_heads and dims.linear_num_value_heads % dims.linear_num_key_heads == 0
    assert dims.num_attention_heads // dims.num_key_value_heads <= 8 and dims.hidden_size % 8 == 0 and dims.intermediate_size % 8 == 0
    config = demo.make_config(dims, {"<|endoftext|>": 8159})
    assert int(config.head_dim * config.rope_parameters["partial_rotary_factor"]) == 64
    assert config.rope_parameters["mrope_section"] == [11, 11, 10]
    with torch.device("meta"):
        model = demo.DemoModel(config)
    tensors = {**model.lm.state_dict(), **{f"mtp.{k}": v for k, v in model.mtp.state_dict().items()}}
    tensors.pop("lm_head.weight")   # tied
    size = sum(v.numel() * (4 if k.endswith(demo.F32_SUFFIXES) else 2) for k, v in tensors.items())
    assert size <= 32_000_000 - 100_000, size   # room for the safetensors header


def test_loop_period_and_first_sentences():
    assert ul.loop_period([5, 6, 7] + [1, 2] * 4) == 2
    assert ul.loop_period(list(range(40))) is None
    assert ul.loop_period([1, 2] * 3) is None   # three repetitions are not yet a loop
    assert first_sentences("One. Two. Three is longer.", 10) == "One. Two."
    assert np.isclose(conversations.fraction("x"), conversations.fraction("x"))


def test_repeat_mask_marks_repeated_ngrams_up_to_the_stop_token():
    tokens = torch.tensor([[1, 2, 3, 4, 9, 1, 2, 3, 4, 7, 7],      # 1 2 3 4 again at 5..8
                           [5, 6, 7, 8, 0, 5, 6, 7, 8, 5, 6]])     # stop (0) at 4: nothing after counts
    lengths = ul.valid_lengths(tokens, [0])
    assert lengths.tolist() == [11, 5]
    mask = ul.repeat_mask(tokens, lengths, n=4)
    assert mask[0].tolist() == [False] * 5 + [True] * 4 + [False] * 2
    assert not mask[1].any()
    run = torch.tensor([[3] * 7])                                    # one token repeated: all but the first 4-gram
    assert ul.repeat_mask(run, ul.valid_lengths(run, [0]), n=4)[0].tolist() == [False] + [True] * 6


def test_greedy_continue_with_the_cache_equals_full_forwards():
    """The cached decode loop picks what argmax over full forwards picks (DeltaNet state and
    attention cache carried correctly), and the unlikelihood loss has a gradient."""
    dims = demo.Dims(vocab_size=300, **demo.SIZES["tiny256"])
    model = demo.build(dims, {"<|endoftext|>": 299}, seed=3).eval()
    with torch.no_grad():
        for p in model.parameters():   # sharper logits than the init's, so argmax ties cannot blur the check
            p.mul_(4.0) if p.ndim >= 2 else None
    prompts = torch.randint(0, 299, (2, 9), generator=torch.Generator().manual_seed(0))
    cont = ul.greedy_continue(model.lm, prompts, 12)
    seq = prompts
    with torch.no_grad():
        for _ in range(12):
            seq = torch.cat([seq, model.lm(input_ids=seq, use_cache=False).logits[:, -1].argmax(-1, keepdim=True)], 1)
    assert torch.equal(cont, seq[:, 9:])
    loss, repeated = ul.unlikelihood_loss(model.lm, prompts, cont, ul.valid_lengths(cont, [299]))
    loss.backward()
    assert 0.0 <= repeated <= 1.0 and loss.item() >= 0.0
    if repeated > 0:
        assert model.lm.model.embed_tokens.weight.grad.abs().sum() > 0


if __name__ == "__main__":
    import traceback
    tests = [f for name, f in sorted(globals().items()) if name.startswith("test_")]
    failed = 0
    for test in tests:
        try:
            test()
            print(f"ok   {test.__name__}")
        except Exception:   # noqa: BLE001 - report every failure, then the count
            failed += 1
            print(f"FAIL {test.__name__}\n{traceback.format_exc()}")
    print(f"{len(tests) - failed} passed, {failed} failed")
    sys.exit(1 if failed else 0)
