#!/usr/bin/env python3
"""Build the float64 parity fixtures for qwenrt from tiny random Qwen 3.5 checkpoints.

Usage (CPU only, deterministic, rerunnable; rewrites only the variant folders it owns):

    python tools/make_fixtures.py --out tests/fixtures

Made with: Python 3.11, torch 2.15.0+cu132 (run on the CPU), transformers 5.24.0,
safetensors 0.8.0, numpy 2.4.6. Other versions may work; the versions actually used are
recorded in every reference.json and the script warns when they differ from these.

What it does, per variant (see VARIANTS below and tests/fixtures/README.md):
  1. builds the model with transformers' own classes (Qwen3_5ForCausalLM,
     Qwen3_5MoeForCausalLM, Qwen3_5ForConditionalGeneration), overwrites EVERY parameter
     with seeded random values (zero-centred norm weights around 0, the gated-norm weight
     around 1, A_log, dt_bias, conv, projections, router, ...), rounds each tensor to the
     dtype it is stored in, and writes a checkpoint folder the way released Qwen3.5 is
     laid out (config.json, generation_config.json, *.safetensors);
  2. reloads that folder with `from_pretrained(dtype=torch.float64)` and checks that every
     parameter equals the stored value exactly (so the files on disk are the reference);
  3. computes the reference in float64 on the CPU with the pure-torch paths
     (torch_chunk_gated_delta_rule for the prompt, torch_recurrent_gated_delta_rule for
     cached decode; no FLA / causal-conv1d / hub kernels): logits of one forward over a
     fixed prompt, and a 16-token greedy continuation through `generate` with the cache;
  4. cross-checks the reference (see "Checks" below) and writes logits.npy,
     greedy_logits.npy and reference.json.

Exact float64. transformers upcasts to float32 in several places *even in a float64
model*: both RMSNorms, the whole gated delta rule (q/k/v/beta/g are cast to float32), the
decay g (A_log.float(), a.float()), the RoPE tables (float32 inv_freq and angles), the
eager attention softmax and the MoE router softmax. A fixture meant to be the oracle for a
float32 engine should not carry float32 rounding of its own, so the reference is computed
in `exact_float64()` mode: the affected transformers functions are recompiled from their
own source with the float32 casts widened to float64 (same code otherwise), and a
TorchDispatchMode audit proves that no tensor of any other floating dtype is touched while
the model runs. The unmodified transformers result (float32 internals) is computed too
and its distance to the reference is recorded in reference.json ("stock_hf_rel_l2") and
asserted to be small: it is both a check of the widening and a measure of transformers'
own float32 noise.

Checks (all asserted):
  * reloaded parameters == stored values, bit for bit (and tied lm_head == embedding);
  * a fresh in-memory model holding the intended values reproduces the reference logits
    bit for bit (the files on disk are exactly what the reference used);
  * stock transformers in float64 agrees with the exact reference (relative L2 < 5e-6 and
    the same greedy tokens), and stock transformers in float32 is within 5e-6 too, so the
    fixture is well-conditioned enough for the engine's 1e-5 float32 target (its bfloat16
    error is recorded as the bar for the engine's bf16 path);
  * the decode path (recurrent delta rule, conv state, KV cache) agrees with one chunked
    forward over prompt + generated tokens (relative error < 1e-12);
  * zeroing any one token mixer or MLP moves the logits by >= 2% (no block hides);
  * every greedy step has a top-1/top-2 logit margin >= 1e-3 and, for MoE, every routing
    decision has a gap >= 1e-3 between the k-th and (k+1)-th router logit (otherwise the
    next prompt candidate is tried); logits have a healthy spread (row std >= 1);
  * derived layouts (sharded, per-expert) reload to the same parameters and give the same
    reference as their base variant.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import importlib.util
import inspect
import json
import os
import re
import shutil
import sys
import textwrap
from collections import Counter
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")  # CPU only, whatever the machine has
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import numpy as np  # noqa: E402
import safetensors  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from safetensors import safe_open  # noqa: E402
from safetensors.torch import save_file  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402
from torch.utils._pytree import tree_flatten  # noqa: E402
from transformers import (  # noqa: E402
    Qwen3_5Config,
    Qwen3_5ForCausalLM,
    Qwen3_5ForConditionalGeneration,
    Qwen3_5MoeForCausalLM,
    Qwen3_5MoeTextConfig,
    Qwen3_5TextConfig,
)
from transformers.models.qwen3_5 import modeling_qwen3_5  # noqa: E402
from transformers.models.qwen3_5.modeling_qwen3_5 import Qwen3_5DecoderLayer  # noqa: E402
from transformers.models.qwen3_5_moe import modeling_qwen3_5_moe  # noqa: E402

TESTED_VERSIONS = {"torch": "2.15.0+cu132", "transformers": "5.24.0"}

MAX_NEW_TOKENS = 16
MIN_GREEDY_MARGIN = 1e-3  # top-1 minus top-2 logit at every greedy step
MIN_ROUTER_GAP = 1e-3  # k-th minus (k+1)-th router logit at every MoE routing decision
MIN_LOGIT_ROW_STD = 1.0  # logits must be spread out, or a relative error says little
# Stock transformers in float64 (float32 internals) vs the exact reference: a check of the
# widening (a mistake there shows as O(1)), and of transformers' own float32 noise.
MAX_STOCK_REL_L2 = 5e-6
# transformers run in float32 vs the exact reference. The engine's float32 target is 1e-5;
# a fixture on which a plain float32 run comes close to it would be too ill-conditioned.
MAX_FLOAT32_REL_L2 = 5e-6
MAX_DECODE_REL_ERR = 1e-12  # recurrent decode vs chunked forward, both in exact float64
# Zeroing any one token mixer or MLP must move the logits at least this much (relative
# L2): no block is negligible, so a bug anywhere shows far above the 1e-5 tolerance.
MIN_BLOCK_EFFECT = 0.02
MAX_PROMPT_ATTEMPTS = 64


# --------------------------------------------------------------------------------------
# Variants
# --------------------------------------------------------------------------------------


def rope(theta: float, head_dim: int, mrope_section: list[int]) -> dict:
    """rope_parameters as released Qwen3.5 writes them; mrope_section sums to rotary_dim/2."""
    assert sum(mrope_section) * 2 == int(head_dim * 0.25), "mrope_section must cover rotary_dim/2"
    return {
        "rope_type": "default",
        "rope_theta": theta,
        "partial_rotary_factor": 0.25,
        "mrope_section": mrope_section,
        "mrope_interleaved": True,
    }


def released_dtype(name: str) -> torch.dtype:
    """Released Qwen3.5: everything bf16 except A_log and the gated-norm weight (f32)."""
    if name.endswith(("linear_attn.A_log", "linear_attn.norm.weight")):
        return torch.float32
    return torch.bfloat16


# mixed_dtypes: (pattern, dtype), first match wins. Each dtype covers matrices, vectors and
# the conv; A_log / gated-norm weight are bf16 here (the Qwen3.6 storage).
MIXED_DTYPE_RULES: list[tuple[str, torch.dtype]] = [
    (r"embed_tokens\.weight$", torch.float32),
    (r"lm_head\.weight$", torch.float16),
    (r"linear_attn\.in_proj_(qkv|z)\.weight$", torch.float16),
    (r"linear_attn\.conv1d\.weight$", torch.float16),
    (r"linear_attn\.dt_bias$", torch.float16),
    (r"linear_attn\.out_proj\.weight$", torch.float32),
    (r"linear_attn\.in_proj_a\.weight$", torch.float32),
    (r"self_attn\.(q|k)_proj\.weight$", torch.float16),
    (r"self_attn\.o_proj\.weight$", torch.float32),
    (r"(input_layernorm|post_attention_layernorm|q_norm|k_norm)\.weight$", torch.float32),
    (r"^model\.norm\.weight$", torch.float32),
    (r"layers\.\d*[02468]\.mlp\.down_proj\.weight$", torch.float32),
    (r"layers\.\d*[13579]\.mlp\.down_proj\.weight$", torch.float16),
    (r"mlp\.gate_proj\.weight$", torch.float16),
    (r".", torch.bfloat16),  # everything else, incl. A_log and linear_attn.norm.weight
]


def mixed_dtype(name: str) -> torch.dtype:
    return next(dtype for pattern, dtype in MIXED_DTYPE_RULES if re.search(pattern, name))


def set_keys(**fields) -> Callable[[dict], None]:
    def edit(cfg: dict) -> None:
        cfg.update(fields)

    return edit


# Released configs carry full_attention_interval next to layer_types, and say bf16.
RELEASED_CONFIG_KEYS = set_keys(full_attention_interval=4, dtype="bfloat16")


def interval_only(interval: int) -> Callable[[dict], None]:
    """Drop layer_types so the reader must derive the pattern from full_attention_interval."""

    def edit(cfg: dict) -> None:
        del cfg["layer_types"]
        cfg["full_attention_interval"] = interval
        cfg["dtype"] = "bfloat16"

    return edit


def vlm_config_edit(cfg: dict) -> None:
    """Fields released Qwen3.5 VLM configs carry that transformers does not write."""
    cfg["dtype"] = "bfloat16"
    text = cfg["text_config"]
    text["full_attention_interval"] = 4
    text["partial_rotary_factor"] = text["rope_parameters"]["partial_rotary_factor"]
    text["mtp_use_dedicated_embeddings"] = False
    text["attn_output_gate"] = True
    text["mamba_ssm_dtype"] = "float32"
    cfg["vision_config"]["deepstack_visual_indexes"] = []


@dataclasses.dataclass(frozen=True)
class Variant:
    name: str
    kind: str  # "dense" (Qwen3_5ForCausalLM), "moe" (Qwen3_5MoeForCausalLM), "vlm"
    text: dict  # text config fields
    seed: int  # weights; prompt candidates derive from it too
    prompt_len: int
    covers: str  # one line for the README
    dtype_of: Callable[[str], torch.dtype] = released_dtype  # storage dtype per tensor name
    edit_config: Callable[[dict], None] = RELEASED_CONFIG_KEYS  # applied to HF's config.json
    vision: dict | None = None


LIN, FULL = "linear_attention", "full_attention"

DENSE_TIED = dict(
    vocab_size=512, hidden_size=64, intermediate_size=160, num_hidden_layers=8,
    layer_types=[LIN, LIN, LIN, FULL] * 2,
    num_attention_heads=4, num_key_value_heads=2, head_dim=32,
    linear_num_key_heads=2, linear_num_value_heads=4,
    linear_key_head_dim=16, linear_value_head_dim=16, linear_conv_kernel_dim=4,
    rms_norm_eps=1e-6, tie_word_embeddings=True, rope_parameters=rope(1e7, 32, [2, 1, 1]),
)  # fmt: skip

DENSE_UNTIED = dict(
    vocab_size=640, hidden_size=48, intermediate_size=112, num_hidden_layers=5,
    layer_types=[LIN, FULL, LIN, LIN, FULL],
    num_attention_heads=4, num_key_value_heads=1, head_dim=16,
    linear_num_key_heads=4, linear_num_value_heads=4,
    linear_key_head_dim=8, linear_value_head_dim=16, linear_conv_kernel_dim=4,
    rms_norm_eps=1e-6, tie_word_embeddings=False, rope_parameters=rope(5e6, 16, [1, 1, 0]),
)  # fmt: skip

DENSE_ODD = dict(
    vocab_size=397, hidden_size=52, intermediate_size=75, num_hidden_layers=6,
    full_attention_interval=3,
    num_attention_heads=3, num_key_value_heads=3, head_dim=24,
    linear_num_key_heads=1, linear_num_value_heads=3,
    linear_key_head_dim=12, linear_value_head_dim=10, linear_conv_kernel_dim=3,
    rms_norm_eps=1e-5, tie_word_embeddings=False, rope_parameters=rope(1e4, 24, [1, 1, 1]),
)  # fmt: skip

MOE = dict(
    vocab_size=768, hidden_size=64, num_hidden_layers=5,
    layer_types=[LIN, LIN, LIN, FULL, LIN],
    num_attention_heads=4, num_key_value_heads=2, head_dim=32,
    linear_num_key_heads=2, linear_num_value_heads=6,
    linear_key_head_dim=16, linear_value_head_dim=8, linear_conv_kernel_dim=4,
    num_experts=8, num_experts_per_tok=2, moe_intermediate_size=32,
    shared_expert_intermediate_size=48,
    rms_norm_eps=1e-6, tie_word_embeddings=False, rope_parameters=rope(1e7, 32, [2, 1, 1]),
)  # fmt: skip

VLM_TEXT = dict(
    vocab_size=1000, hidden_size=64, intermediate_size=128, num_hidden_layers=4,
    layer_types=[LIN, LIN, LIN, FULL],
    num_attention_heads=8, num_key_value_heads=2, head_dim=32,
    linear_num_key_heads=2, linear_num_value_heads=4,
    linear_key_head_dim=16, linear_value_head_dim=16, linear_conv_kernel_dim=4,
    rms_norm_eps=1e-6, tie_word_embeddings=False, rope_parameters=rope(1e7, 32, [2, 1, 1]),
    mtp_num_hidden_layers=1,
)  # fmt: skip

# The head sizes of every released Qwen 3.5 model (attention 256 with rotary 64, DeltaNet 128), on a
# tiny hidden size: the shapes the CUDA kernels are built for. GQA group 6 as in 27B, nv = 3·nk.
RELEASED_HEADS = dict(
    vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=4,
    layer_types=[LIN, LIN, LIN, FULL],
    num_attention_heads=6, num_key_value_heads=1, head_dim=256,
    linear_num_key_heads=1, linear_num_value_heads=3,
    linear_key_head_dim=128, linear_value_head_dim=128, linear_conv_kernel_dim=4,
    rms_norm_eps=1e-6, tie_word_embeddings=True, rope_parameters=rope(1e7, 256, [11, 11, 10]),
)  # fmt: skip

# A mixture-of-experts model with the released head sizes and the released routing width (35B-A3B:
# 256 experts top-8, GQA 8 : 1 per kv head group, nv = 2 * nk): the shapes the CUDA MoE kernels
# take, on a tiny hidden size, with 64 experts so that top-8 leaves most experts idle per token
# (expert width 16, the smallest the kernels' 8-row tiles take, keeps the checkpoint at ~1.5 MB).
MOE_RELEASED = dict(
    vocab_size=512, hidden_size=64, num_hidden_layers=4,
    layer_types=[LIN, LIN, LIN, FULL],
    num_attention_heads=8, num_key_value_heads=1, head_dim=256,
    linear_num_key_heads=1, linear_num_value_heads=2,
    linear_key_head_dim=128, linear_value_head_dim=128, linear_conv_kernel_dim=4,
    num_experts=64, num_experts_per_tok=8, moe_intermediate_size=16,
    shared_expert_intermediate_size=16,
    rms_norm_eps=1e-6, tie_word_embeddings=False, rope_parameters=rope(1e7, 256, [11, 11, 10]),
)  # fmt: skip

VLM_VISION = dict(
    depth=1, hidden_size=32, num_heads=2, intermediate_size=64, out_hidden_size=64,
    num_position_embeddings=16, patch_size=16, temporal_patch_size=2, spatial_merge_size=2,
)  # fmt: skip

VARIANTS = [
    Variant(
        "dense_tied", "dense", DENSE_TIED, seed=101, prompt_len=70,
        covers="flat Qwen3_5ForCausalLM layout, tied lm_head, GQA 4/2, nk=2 < nv=4, 3 linear + 1 full "
        "repeated twice, prompt of 70 tokens (> one 64-token GDN chunk)",
    ),
    Variant(
        "dense_untied", "dense", DENSE_UNTIED, seed=202, prompt_len=41,
        # RELEASED_CONFIG_KEYS: full_attention_interval=4 disagrees with layer_types on
        # purpose here; layer_types wins.
        covers="lm_head.weight present, MQA (1 kv head), nk = nv = 4, dk=8 != dv=16, explicit "
        "irregular layer_types [lin, full, lin, lin, full] (full_attention_interval=4 disagrees "
        "and must be ignored)",
    ),
    Variant(
        "dense_odd", "dense", DENSE_ODD, seed=303, prompt_len=67,
        edit_config=interval_only(3),
        covers="odd sizes (H=52, I=75, V=397, head_dim 24 -> rotary dim 6), MHA 3/3, nv = 3*nk, "
        "dk=12 != dv=10, conv kernel 3, rms_norm_eps 1e-5, rope_theta 1e4, no layer_types "
        "(pattern from full_attention_interval=3)",
    ),
    Variant(
        "moe", "moe", MOE, seed=404, prompt_len=64,
        covers="Qwen3_5MoeForCausalLM, 8 experts top-2 + gated shared expert, experts fused "
        "(experts.gate_up_proj [E,2Ie,H], experts.down_proj [E,H,Ie]), nv = 3*nk, dk=16 != dv=8, "
        "layers [lin, lin, lin, full, lin], prompt of exactly 64 tokens",
    ),
    Variant(
        "vlm", "vlm", VLM_TEXT, seed=505, prompt_len=50,
        edit_config=vlm_config_edit, vision=VLM_VISION,
        covers="Qwen3_5ForConditionalGeneration layout: nested text_config/vision_config, "
        "model.language_model.* + model.visual.* + top-level lm_head.weight, mtp.* tensors "
        "(mtp_num_hidden_layers 1), GQA 8/2; reference is the text-only forward",
    ),
    Variant(
        "released_heads", "dense", RELEASED_HEADS, seed=707, prompt_len=70,
        covers="released head sizes (attention head_dim 256, rotary 64, mrope [11,11,10]; DeltaNet "
        "dk = dv = 128, conv 4) on hidden 64: GQA 6/1, nv = 3*nk, tied; the shapes the CUDA "
        "kernels are built for",
    ),
    Variant(
        "moe_released", "moe", MOE_RELEASED, seed=808, prompt_len=70,
        covers="Qwen3_5MoeForCausalLM with the released head sizes (attention 256, rotary 64; "
        "DeltaNet 128) and routing width: 64 experts top-8 + gated shared expert, GQA 8/1, "
        "nv = 2*nk, untied; the shapes the CUDA MoE kernels are built for",
    ),
    Variant(
        "mixed_dtypes", "dense", DENSE_UNTIED, seed=606, prompt_len=66,
        dtype_of=mixed_dtype,
        covers="dense_untied config with per-tensor storage dtypes: f32 (full precision), f16 "
        "(incl. subnormals) and bf16 matrices/vectors/conv; A_log and linear_attn.norm.weight in "
        "bf16 (Qwen3.6 style)",
    ),
]

# Variants that store the weights of a base variant in another layout: same reference.
DERIVED = {
    "sharded": ("dense_tied", "dense_tied split over 3 shards model-0000{1,2,3}-of-00003."
                "safetensors + model.safetensors.index.json; same reference as dense_tied"),
    "moe_per_expert": ("moe", "moe with experts stored per expert (mlp.experts.{e}.{gate,up,down}"
                       "_proj.weight, the layout transformers' save_pretrained writes); same "
                       "reference as moe"),
}  # fmt: skip


# --------------------------------------------------------------------------------------
# Exact float64 mode
# --------------------------------------------------------------------------------------

# The float32 casts transformers hard-codes, widened to float64.
_WIDENINGS = [
    (re.compile(r"torch\.float32\b"), "torch.float64"),
    (re.compile(r"torch\.float\b"), "torch.float64"),  # `torch.float` is float32
    (re.compile(r"\.float\(\)"), ".double()"),
]

# (module, object path) of everything that casts to float32 on the text-model path.
_WIDEN_TARGETS = [
    (module, path)
    for module, prefix in ((modeling_qwen3_5, "Qwen3_5"), (modeling_qwen3_5_moe, "Qwen3_5Moe"))
    for path in (
        "torch_chunk_gated_delta_rule",
        "torch_recurrent_gated_delta_rule",
        "eager_attention_forward",
        f"{prefix}RMSNorm.forward",
        f"{prefix}RMSNormGated.forward",
        f"{prefix}GatedDeltaNet.forward",
        f"{prefix}TextRotaryEmbedding.forward",
        f"{prefix}TextRotaryEmbedding.compute_default_rope_parameters",
    )
] + [(modeling_qwen3_5_moe, "Qwen3_5MoeTopKRouter.forward")]


def _widened(module, path: str):
    """Recompile `module.path` from its source with the float32 casts widened to float64.

    The source (decorators included) is executed in the module's own namespace, so the new
    function resolves globals exactly like the original one.
    """
    owner, name = (module, path) if "." not in path else (getattr(module, path.split(".")[0]), path.split(".")[1])
    source = textwrap.dedent(inspect.getsource(inspect.unwrap(getattr(owner, name))))
    total = 0
    for pattern, replacement in _WIDENINGS:
        source, count = pattern.subn(replacement, source)
        total += count
    if total == 0:
        raise RuntimeError(f"{module.__name__}.{path}: no float32 cast found; transformers changed?")
    namespace: dict = {}
    exec(compile(source, f"<widened {module.__name__}.{path}>", "exec"), vars(module), namespace)
    return owner, name, namespace[name]


@contextlib.contextmanager
def exact_float64():
    """Run transformers' Qwen3.5 code with its float32 upcasts widened to float64."""
    saved = []
    try:
        for module, path in _WIDEN_TARGETS:
            owner, name, new = _widened(module, path)
            saved.append((owner, name, inspect.getattr_static(owner, name)))
            setattr(owner, name, new)
        yield
    finally:
        for owner, name, original in reversed(saved):
            setattr(owner, name, original)


class DtypeAudit(TorchDispatchMode):
    """Records every floating tensor dtype other than float64 seen while a model forward runs."""

    def __init__(self):
        super().__init__()
        self.active = False
        self.forward_calls = 0
        self.offenders: Counter = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if self.active:
            for t in tree_flatten((args, kwargs, out))[0]:
                if isinstance(t, torch.Tensor) and t.is_floating_point() and t.dtype != torch.float64:
                    self.offenders[(str(func), str(t.dtype))] += 1
        return out

    def watch(self, model: torch.nn.Module) -> None:
        model.register_forward_pre_hook(self._enter)
        model.register_forward_hook(lambda *_: setattr(self, "active", False))

    def _enter(self, *_) -> None:
        self.active = True
        self.forward_calls += 1

    def check(self) -> None:
        if self.offenders:
            raise AssertionError(f"non-float64 tensors in the exact reference: {dict(self.offenders)}")


# --------------------------------------------------------------------------------------
# Random parameters
# --------------------------------------------------------------------------------------


def _normal(std: float, mean: float = 0.0):
    return lambda rng, shape: rng.normal(mean, std, shape)


def _fan_in(gain: float = 1.0):
    """std = gain / sqrt(fan_in): keeps activations O(1) through every projection."""

    def sample(rng, shape):
        assert len(shape) >= 2, f"projection rule applied to a vector of shape {shape}"
        return rng.normal(0.0, gain / np.sqrt(np.prod(shape[1:])), shape)

    return sample


def _experts_fan_in(gain: float = 1.0):
    """[E, out, in] expert stacks: fan_in is the last dimension."""
    return lambda rng, shape: rng.normal(0.0, gain / np.sqrt(shape[-1]), shape)


# Gain of the projections that write into the residual stream (o_proj, out_proj,
# down_proj). Below 1 so that each block adds a fraction of the stream rather than
# doubling it: the network then does not amplify rounding errors layer after layer.
RESIDUAL_GAIN = 0.5


# (pattern, sampler). First match wins; a parameter that matches nothing is an error, so a
# new parameter in transformers cannot slip through with its default initialisation.
INIT_RULES: list[tuple[str, Callable]] = [
    # Vision tower (ignored by the engine, randomised all the same). First, so that its
    # LayerNorm weights (around 1) are not taken for zero-centred norms.
    (r"^model\.visual\..*(norm\d?|merger\.norm)\.weight$", _normal(0.1, mean=1.0)),
    (r"^model\.visual\..*\.bias$", _normal(0.02)),
    (r"^model\.visual\.pos_embed\.weight$", _normal(0.1)),
    # Gated DeltaNet.
    (r"linear_attn\.A_log$", lambda rng, shape: np.log(rng.uniform(1.0, 16.0, shape))),
    # softplus(a + dt_bias) spans ~0.005..1.5: some heads remember for many tokens, some forget.
    (r"linear_attn\.dt_bias$", lambda rng, shape: rng.uniform(-5.0, 0.0, shape)),
    (r"linear_attn\.norm\.weight$", _normal(0.2, mean=1.0)),  # plain weight, around 1
    (r"linear_attn\.conv1d\.weight$", _normal(0.5)),  # [C, 1, K]: output ~ input scale
    # Zero-centred (1 + w) norms: around 0.
    (r"(input_layernorm|post_attention_layernorm|q_norm|k_norm)\.weight$", _normal(0.1)),
    (r"(^|\.)norm\.weight$", _normal(0.1)),  # final norm, mtp.norm
    (r"^mtp\.pre_fc_norm_(embedding|hidden)\.weight$", _normal(0.1)),
    # Embedding ~ N(0, 1): the residual stream starts at unit scale and the blocks add to
    # it (RESIDUAL_GAIN). Untied head: normed h has |h| ~ sqrt(H), so logit std ~2 (tied:
    # ~sqrt(H)).
    (r"embed_tokens\.weight$", _normal(1.0)),
    (r"^lm_head\.weight$", _fan_in(2.0)),
    # MoE: a spread-out router so that routing decisions are clear.
    (r"mlp\.gate\.weight$", _fan_in(2.0)),
    (r"mlp\.experts\.gate_up_proj$", _experts_fan_in()),
    (r"mlp\.experts\.down_proj$", _experts_fan_in(RESIDUAL_GAIN)),
    (r"(o_proj|out_proj|down_proj)\.weight$", _fan_in(RESIDUAL_GAIN)),
    # Every other matrix is a projection (incl. shared_expert_gate [1, H], mtp.fc [H, 2H]).
    (r"\.weight$", _fan_in(1.0)),
]


def sample_parameter(name: str, shape: tuple[int, ...], rng: np.random.Generator) -> torch.Tensor:
    for pattern, sampler in INIT_RULES:
        if re.search(pattern, name):
            return torch.from_numpy(np.asarray(sampler(rng, shape), dtype=np.float64).reshape(shape))
    raise KeyError(f"no initialisation rule for parameter {name}")


def random_state(names_and_shapes: list[tuple[str, tuple[int, ...]]], seed: int) -> dict[str, torch.Tensor]:
    """float64 random values for every named tensor, drawn in the given (state-dict) order."""
    rng = np.random.default_rng(seed)
    return {name: sample_parameter(name, shape, rng) for name, shape in names_and_shapes}


def store(values: dict[str, torch.Tensor], dtype_of: Callable[[str], torch.dtype]) -> dict[str, torch.Tensor]:
    """Round every tensor to its storage dtype: the stored values are the model."""
    stored = {}
    for name, value in values.items():
        dtype = dtype_of(name)
        t = value.to(dtype).contiguous()
        if not torch.isfinite(t.double()).all():
            raise ValueError(f"{name}: not finite in {dtype}")
        stored[name] = t
    return stored


# --------------------------------------------------------------------------------------
# Models and checkpoints
# --------------------------------------------------------------------------------------


def make_config(variant: Variant):
    if variant.kind == "dense":
        return Qwen3_5TextConfig(**variant.text)
    if variant.kind == "moe":
        return Qwen3_5MoeTextConfig(**variant.text)
    return Qwen3_5Config(text_config=dict(variant.text), vision_config=dict(variant.vision),
                         tie_word_embeddings=variant.text["tie_word_embeddings"])


def model_class(kind: str):
    return {"dense": Qwen3_5ForCausalLM, "moe": Qwen3_5MoeForCausalLM, "vlm": Qwen3_5ForConditionalGeneration}[kind]


def text_config(config):
    return getattr(config, "text_config", config)


def mtp_names_and_shapes(text: dict) -> list[tuple[str, tuple[int, ...]]]:
    """The released MTP block (spec §7.1): fc, the two pre-fc norms, a final norm and one
    full-attention decoder layer with a dense MLP. transformers has no module for it (it
    drops `mtp.*` on load), so the layer's names come from its own decoder layer class."""
    hidden = text["hidden_size"]
    layer_config = Qwen3_5TextConfig(**{**text, "num_hidden_layers": 1, "layer_types": [FULL]})
    layer = Qwen3_5DecoderLayer(layer_config, layer_idx=0)
    names = [("mtp.fc.weight", (hidden, 2 * hidden)),
             ("mtp.pre_fc_norm_embedding.weight", (hidden,)),
             ("mtp.pre_fc_norm_hidden.weight", (hidden,)),
             ("mtp.norm.weight", (hidden,))]  # fmt: skip
    names += [(f"mtp.layers.0.{n}", tuple(p.shape)) for n, p in layer.named_parameters()]
    return names


def checkpoint_tensors(variant: Variant, model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """Random stored tensors under the names of a released checkpoint (model state dict,
    without the tied lm_head, plus mtp.* for the VLM)."""
    names = [(n, tuple(p.shape)) for n, p in model.state_dict().items()]
    if text_config(model.config).tie_word_embeddings:
        names = [(n, s) for n, s in names if n != "lm_head.weight"]
    if variant.kind == "vlm":
        names += mtp_names_and_shapes(variant.text)
    return store(random_state(names, variant.seed), variant.dtype_of)


def split_experts(tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Fused experts -> one gate/up/down matrix per expert (gate = rows [0, Ie) of gate_up)."""
    out = {}
    for name, t in tensors.items():
        if name.endswith("mlp.experts.gate_up_proj"):
            prefix, half = name[: -len("gate_up_proj")], t.shape[1] // 2
            for e in range(t.shape[0]):
                out[f"{prefix}{e}.gate_proj.weight"] = t[e, :half].clone()
                out[f"{prefix}{e}.up_proj.weight"] = t[e, half:].clone()
        elif name.endswith("mlp.experts.down_proj"):
            prefix = name[: -len("down_proj")]
            for e in range(t.shape[0]):
                out[f"{prefix}{e}.down_proj.weight"] = t[e].clone()
        else:
            out[name] = t
    return out


def write_safetensors(folder: Path, tensors: dict[str, torch.Tensor], shards: int = 1) -> None:
    """model.safetensors, or HF-style numbered shards plus model.safetensors.index.json."""
    if shards == 1:
        save_file(tensors, folder / "model.safetensors", metadata={"format": "pt"})
        return
    total = sum(t.numel() * t.element_size() for t in tensors.values())
    groups: list[dict] = [{} for _ in range(shards)]
    running = 0
    for name, t in tensors.items():  # state-dict order, cut by bytes: layers straddle shards
        groups[min(shards - 1, running * shards // total)][name] = t
        running += t.numel() * t.element_size()
    weight_map = {}
    for i, group in enumerate(groups, start=1):
        assert group, "empty shard"
        file = f"model-{i:05d}-of-{shards:05d}.safetensors"
        save_file(group, folder / file, metadata={"format": "pt"})
        weight_map.update(dict.fromkeys(group, file))
    index = {"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}
    write_json(folder / "model.safetensors.index.json", index)


def write_json(path: Path, obj) -> None:
    path.write_text(json.dumps(obj, indent=2, sort_keys=True) + "\n")


def write_checkpoint(variant: Variant, folder: Path) -> dict[str, torch.Tensor]:
    """Build the model with transformers, write config + random weights; return the stored tensors."""
    torch.manual_seed(variant.seed)  # transformers' own init is overwritten, but keep it fixed
    model = model_class(variant.kind)(make_config(variant))
    tensors = checkpoint_tensors(variant, model)

    folder.mkdir(parents=True)
    model.save_pretrained(folder)  # config.json and generation_config.json as HF writes them

    # Our names must be the ones transformers writes, except that it writes MoE experts
    # per expert and has no mtp.*; fused experts and mtp.* are what released checkpoints hold.
    theirs = set()
    for file in folder.glob("*.safetensors"):
        with safe_open(file, "pt") as f:
            theirs |= set(f.keys())
        file.unlink()
    ours = {n for n in split_experts(tensors) if not n.startswith("mtp.")}
    assert ours == theirs, f"tensor names differ from transformers': {sorted(ours ^ theirs)[:10]}"

    write_safetensors(folder, tensors)
    config = json.loads((folder / "config.json").read_text())
    variant.edit_config(config)
    write_json(folder / "config.json", config)
    return tensors


def copy_checkpoint(src: Path, dst: Path, tensors: dict[str, torch.Tensor], shards: int = 1) -> None:
    """Same config, same weights, another tensor layout."""
    dst.mkdir(parents=True)
    for name in ("config.json", "generation_config.json"):
        shutil.copy(src / name, dst / name)
    write_safetensors(dst, tensors, shards)


# --------------------------------------------------------------------------------------
# References
# --------------------------------------------------------------------------------------


def load_float64(kind: str, folder: Path) -> torch.nn.Module:
    model = model_class(kind).from_pretrained(
        folder, dtype=torch.float64, attn_implementation="eager", experts_implementation="eager"
    )
    return model.eval()


def expected_parameters(model: torch.nn.Module, stored: dict[str, torch.Tensor]) -> None:
    """Every parameter of the loaded model equals the stored value exactly, and every
    stored tensor but mtp.* (which transformers drops) is used."""
    tied = text_config(model.config).tie_word_embeddings
    embed = next(n for n in stored if n.endswith("embed_tokens.weight"))
    state = model.state_dict()
    unused = {n for n in stored if not n.startswith("mtp.")} - set(state)
    assert not unused, f"stored tensors the model does not have: {sorted(unused)[:5]}"
    for name, param in state.items():
        want = stored[embed] if (tied and name == "lm_head.weight") else stored[name]
        if not torch.equal(param, want.to(torch.float64)):
            raise AssertionError(f"{name}: loaded value differs from the stored one")


def make_prompt(seed: int, attempt: int, length: int, vocab: int) -> list[int]:
    rng = np.random.default_rng([seed, attempt])
    return rng.integers(0, vocab, size=length).tolist()


class RouterGaps:
    """Smallest gap between the k-th and (k+1)-th router logit over all routing decisions."""

    def __init__(self, model: torch.nn.Module):
        self.min_gap = float("inf")
        for module in model.modules():
            if type(module).__name__.endswith("TopKRouter"):
                module.register_forward_hook(self._record)

    def _record(self, module, inputs, outputs) -> None:
        router_logits = outputs[0].detach()
        top = router_logits.topk(module.top_k + 1, dim=-1).values
        self.min_gap = min(self.min_gap, (top[:, -2] - top[:, -1]).min().item())


def decoder_layers(model: torch.nn.Module) -> torch.nn.ModuleList:
    inner = model.model
    return inner.language_model.layers if hasattr(inner, "language_model") else inner.layers


def _zero_output(module, inputs, output):
    if isinstance(output, tuple):  # attention returns (output, weights)
        return (torch.zeros_like(output[0]),) + output[1:]
    return torch.zeros_like(output)


def min_block_effect(model: torch.nn.Module, prompt: list[int], logits: torch.Tensor) -> float:
    """Smallest change of the logits (relative L2) when one token mixer or MLP is zeroed."""
    effects = []
    for layer in decoder_layers(model):
        mixer = layer.linear_attn if hasattr(layer, "linear_attn") else layer.self_attn
        for block in (mixer, layer.mlp):
            handle = block.register_forward_hook(_zero_output)
            try:
                effects.append(rel_l2(forward_logits(model, prompt), logits))
            finally:
                handle.remove()
    return min(effects)


def forward_logits(model: torch.nn.Module, ids: list[int]) -> torch.Tensor:
    with torch.no_grad():
        return model(input_ids=torch.tensor([ids]), use_cache=False).logits[0]


def greedy(model: torch.nn.Module, prompt: list[int]) -> tuple[list[int], torch.Tensor]:
    """16 greedy tokens with the cache (chunked prefill, then the recurrent decode path).

    The logits are taken from the model's own output: `generate` casts them to float32
    before choosing (and before returning them with output_logits)."""
    captured = []
    handle = model.register_forward_hook(lambda m, i, out: captured.append(out.logits[0, -1].clone()))
    try:
        with torch.no_grad():
            out = model.generate(
                torch.tensor([prompt]), do_sample=False, max_new_tokens=MAX_NEW_TOKENS,
                min_new_tokens=MAX_NEW_TOKENS, use_cache=True, eos_token_id=None, pad_token_id=None,
            )  # fmt: skip
    finally:
        handle.remove()
    tokens = out[0, len(prompt) :].tolist()
    assert len(tokens) == len(captured) == MAX_NEW_TOKENS
    step_logits = torch.stack(captured)  # [16, V]: prefill, then one row per decode step
    assert tokens == step_logits.argmax(-1).tolist()
    return tokens, step_logits


def top2_margins(logits: torch.Tensor) -> list[float]:
    top = logits.topk(2, dim=-1).values
    return (top[:, 0] - top[:, 1]).tolist()


def rel_l2(a: torch.Tensor, b: torch.Tensor) -> float:
    return ((a - b).norm() / b.norm()).item()


@dataclasses.dataclass
class Reference:
    prompt: list[int]
    attempt: int
    logits: torch.Tensor  # [T, V]
    tokens: list[int]
    step_logits: torch.Tensor  # [16, V]
    margins: list[float]
    router_min_gap: float | None
    decode_rel_err: float
    block_effect: float


def exact_reference(kind: str, folder: Path, stored: dict[str, torch.Tensor], seed: int,
                    prompt_len: int, prompt: list[int] | None = None) -> Reference:
    """Reload the checkpoint in float64 and compute the exact reference.

    Tries prompt candidates until every greedy margin and routing gap is clear, unless the
    prompt is given (derived variants)."""
    audit = DtypeAudit()
    with exact_float64(), audit:
        model = load_float64(kind, folder)
        expected_parameters(model, stored)
        audit.watch(model)
        router = RouterGaps(model)
        vocab = text_config(model.config).vocab_size
        for attempt in range(MAX_PROMPT_ATTEMPTS):
            candidate = prompt or make_prompt(seed, attempt, prompt_len, vocab)
            router.min_gap = float("inf")
            logits = forward_logits(model, candidate)
            tokens, step_logits = greedy(model, candidate)
            margins = top2_margins(step_logits)
            router_gap = router.min_gap if kind == "moe" else None
            clear = min(margins) >= MIN_GREEDY_MARGIN and (router_gap is None or router_gap >= MIN_ROUTER_GAP)
            if clear or prompt is not None:
                break
        else:
            raise RuntimeError(f"{folder.name}: no prompt with clear margins in {MAX_PROMPT_ATTEMPTS} attempts")
        # The decode path must agree with one chunked forward over prompt + generated tokens.
        full = forward_logits(model, candidate + tokens[:-1])[len(candidate) - 1 :]
        decode_rel_err = ((step_logits - full).abs().max() / full.abs().max()).item()
        block_effect = min_block_effect(model, candidate, logits)
    audit.check()
    # One forward + prefill + 15 decode steps + one check forward, at least, were audited.
    assert audit.forward_calls >= MAX_NEW_TOKENS + 2, audit.forward_calls
    if not clear:
        raise AssertionError(f"{folder.name}: margins {min(margins)} / router gap {router_gap} not clear")
    assert decode_rel_err < MAX_DECODE_REL_ERR, f"{folder.name}: decode vs forward {decode_rel_err}"
    # The prefill inside generate (cache on) is the same computation as the plain forward.
    assert rel_l2(step_logits[0], logits[-1]) < 1e-14, f"{folder.name}: prefill differs from forward"
    row_std = logits.std(dim=-1).min().item()
    assert row_std >= MIN_LOGIT_ROW_STD, f"{folder.name}: logits too flat (row std {row_std})"
    assert block_effect >= MIN_BLOCK_EFFECT, f"{folder.name}: a block moves the logits by only {block_effect}"
    return Reference(candidate, attempt, logits, tokens, step_logits, margins, router_gap, decode_rel_err,
                     block_effect)


def in_memory_logits(variant: Variant, stored: dict[str, torch.Tensor], prompt: list[int]) -> torch.Tensor:
    """A model built in memory from the intended values, not from the files."""
    with exact_float64():
        model = model_class(variant.kind)._from_config(
            make_config(variant), attn_implementation="eager", experts_implementation="eager"
        )
        model = model.to(torch.float64).eval()
        values = {n: t.to(torch.float64) for n, t in stored.items() if not n.startswith("mtp.")}
        missing, unexpected = model.load_state_dict(values, strict=False)
        allowed_missing = {"lm_head.weight"} if text_config(model.config).tie_word_embeddings else set()
        assert set(missing) <= allowed_missing and not unexpected, (missing, unexpected)
        if allowed_missing:
            model.tie_weights()
        return forward_logits(model, prompt)


def stock_transformers(kind: str, folder: Path, dtype: torch.dtype) -> torch.nn.Module:
    """Unmodified transformers (default attention, eager experts) loaded in `dtype`."""
    return model_class(kind).from_pretrained(folder, dtype=dtype, experts_implementation="eager").eval()


@dataclasses.dataclass
class StockErrors:
    """Relative L2 distance of unmodified transformers' logits to the exact reference."""

    float64: float  # float64 model, float32 internals
    float32: float  # what a plain float32 implementation gets
    bfloat16: float  # transformers' own bf16 error: the bar for the engine's bf16 path
    float64_tokens: list[int]


def stock_errors(kind: str, folder: Path, ref: Reference) -> StockErrors:
    errors = {}
    for dtype in (torch.float64, torch.float32, torch.bfloat16):
        model = stock_transformers(kind, folder, dtype)
        errors[dtype] = rel_l2(forward_logits(model, ref.prompt).double(), ref.logits)
    tokens = greedy(stock_transformers(kind, folder, torch.float64), ref.prompt)[0]
    return StockErrors(errors[torch.float64], errors[torch.float32], errors[torch.bfloat16], tokens)


# --------------------------------------------------------------------------------------
# Output
# --------------------------------------------------------------------------------------


def save_reference(folder: Path, ref: Reference, stock: StockErrors, notes: str) -> None:
    np.save(folder / "logits.npy", np.ascontiguousarray(ref.logits.numpy(), dtype="<f8"))
    np.save(folder / "greedy_logits.npy", np.ascontiguousarray(ref.step_logits.numpy(), dtype="<f8"))
    reference = {
        "prompt": ref.prompt,
        "greedy": ref.tokens,
        "greedy_margins": ref.margins,
        "max_new_tokens": MAX_NEW_TOKENS,
        "transformers": transformers.__version__,
        "torch": torch.__version__,
        "notes": notes,
        "prompt_attempt": ref.attempt,
        "logits_shape": list(ref.logits.shape),
        "stock_hf_rel_l2": stock.float64,
        "float32_hf_rel_l2": stock.float32,
        "bfloat16_hf_rel_l2": stock.bfloat16,
        "decode_vs_forward_max_rel_err": ref.decode_rel_err,
        "min_block_ablation_rel_l2": ref.block_effect,
    }
    if ref.router_min_gap is not None:
        reference["router_min_topk_gap"] = ref.router_min_gap
    write_json(folder / "reference.json", reference)


NOTES = (
    "Exact float64 reference from transformers' Qwen3.5 code on the CPU, with its hard-coded "
    "float32 upcasts (RMSNorms, gated delta rule, decay g, RoPE tables, softmaxes) widened to "
    "float64; pure-torch chunked (prompt) and recurrent (decode) gated delta rule. logits.npy: "
    "[T, V] float64 of one forward over the prompt. greedy_logits.npy: [16, V] float64 raw logits "
    "that chose each greedy token (row 0 = last prompt row, then the cached decode steps). "
    "greedy_margins: top-1 minus top-2 logit per greedy step. stock_hf_rel_l2, float32_hf_rel_l2, "
    "bfloat16_hf_rel_l2: relative L2 distance to logits.npy of unmodified transformers loaded in "
    "float64 (float32 internals), float32 and bfloat16."
)


def describe(variant_name: str, folder: Path) -> dict:
    """Dimensions of a written fixture, read back from its config.json (for the README)."""
    config = json.loads((folder / "config.json").read_text())
    text = config.get("text_config", config)
    types = text.get("layer_types") or [
        FULL if (i + 1) % text["full_attention_interval"] == 0 else LIN for i in range(text["num_hidden_layers"])
    ]
    files = sorted(p.name for p in folder.iterdir())
    return {
        "variant": variant_name,
        "arch": config["architectures"][0],
        "H": text["hidden_size"],
        "I": text.get("intermediate_size", "-"),
        "L": text["num_hidden_layers"],
        "pattern": "".join("F" if t == FULL else "L" for t in types),
        "Nq/Nkv/Dh": f"{text['num_attention_heads']}/{text['num_key_value_heads']}/{text['head_dim']}",
        "nk/nv": f"{text['linear_num_key_heads']}/{text['linear_num_value_heads']}",
        "dk/dv": f"{text['linear_key_head_dim']}/{text['linear_value_head_dim']}",
        "K": text["linear_conv_kernel_dim"],
        "V": text["vocab_size"],
        "tied": text["tie_word_embeddings"],
        "experts": (f"{text['num_experts']} top-{text['num_experts_per_tok']}, Ie {text['moe_intermediate_size']}, "
                    f"shared {text['shared_expert_intermediate_size']}") if "num_experts" in text else "-",
        "T": len(json.loads((folder / "reference.json").read_text())["prompt"]),
        "files": files,
        "bytes": sum(p.stat().st_size for p in folder.iterdir()),
    }  # fmt: skip


README_HEAD = """\
# Parity fixtures (float64 oracle)

Generated by `tools/make_fixtures.py`; do not edit by hand. Regenerate with

    python tools/make_fixtures.py --out tests/fixtures

(CPU only, deterministic on one machine: a rerun there rewrites identical files; another CPU may change the last digits of the float64 values, ~1e-15.) Made with torch {torch},
transformers {transformers}, safetensors {safetensors}, numpy {numpy}.

Each folder is a complete Hugging Face checkpoint of a tiny random Qwen 3.5 model, built
with transformers' own classes, plus its reference outputs:

| file | content |
|---|---|
| `config.json`, `generation_config.json` | as `save_pretrained` writes them, plus the edits listed below |
| `model.safetensors` (or shards + `model.safetensors.index.json`) | every parameter random; stored values are exact (the reference uses exactly these) |
| `logits.npy` | float64 `<f8`, C order, `[T, V]`: logits of one forward over the whole prompt |
| `greedy_logits.npy` | float64 `[16, V]`: the raw logits that chose each greedy token (row 0 = last prompt position, rows 1.. = cached decode steps) |
| `reference.json` | `prompt` (T ids), `greedy` (16 generated ids), `greedy_margins` (top-1 minus top-2 per step, all >= 1e-3), `max_new_tokens`, versions, `notes`, and measured values: `stock_hf_rel_l2` / `float32_hf_rel_l2` / `bfloat16_hf_rel_l2` (unmodified transformers loaded in float64 / float32 / bfloat16, relative L2 to `logits.npy`), `decode_vs_forward_max_rel_err`, `min_block_ablation_rel_l2`, `prompt_attempt`, `router_min_topk_gap` (MoE) |

Engine targets: relative L2 error of `logits.npy` <= 1e-5 (CPU float32 path; a plain
float32 transformers run gets about 1e-6 here, see the table below), greedy tokens identical
to `greedy` (16 new tokens; no EOS is configured, never stop early), and for the bf16 path
an error no larger than `bfloat16_hf_rel_l2`. Relative L2 is `||x - ref||_2 / ||ref||_2`
over the whole `[T, V]` array.

## How the references are computed

* Weights: every parameter drawn from a seeded numpy generator (std given): zero-centred
  `(1 + w)` norm weights (input/post-attention/final norm, q_norm/k_norm, MTP norms) mean 0,
  std 0.1; `linear_attn.norm.weight` (plain weight) mean 1, std 0.2; `A_log` = log U(1, 16);
  `dt_bias` ~ U(-5, 0); conv1d std 0.5; embedding std 1; projections std 1/sqrt(fan_in),
  except those writing into the residual stream (o_proj, out_proj, down_proj, experts'
  down_proj) std 0.5/sqrt(fan_in); lm_head and router std 2/sqrt(H). These scales keep the
  network well-conditioned (float32 rounding is not amplified layer after layer) while
  every block still matters: zeroing any one token mixer or MLP moves the logits by at
  least 2% (asserted; `min_block_ablation_rel_l2`). Each tensor is then rounded to its storage
  dtype; released Qwen3.5 storage is bf16 except `linear_attn.A_log` and
  `linear_attn.norm.weight` in f32 (full f32 precision, not bf16-rounded).
* Reference: the folder is reloaded with `from_pretrained(dtype=torch.float64)` (every
  parameter checked equal to the stored value) and run on the CPU with the pure-torch
  paths only: `torch_chunk_gated_delta_rule` (chunk 64) for the prompt and
  `torch_recurrent_gated_delta_rule` for cached decode, eager attention, eager experts.
* Exact float64: transformers upcasts to float32 in several places even in a float64
  model (both RMSNorms, the whole gated delta rule, the decay `g`, the RoPE tables, the
  attention and router softmaxes). The script recompiles those functions from
  transformers' source with the float32 casts widened to float64 and audits (with a
  TorchDispatchMode) that no non-float64 floating tensor is touched while the model runs.
  Unmodified transformers in float64 (`stock_hf_rel_l2`) is asserted within 5e-6 of the
  reference with identical greedy tokens, and transformers in float32
  (`float32_hf_rel_l2`) within 5e-6 (so a correct float32 engine has room under 1e-5).
  Note that `generate` casts logits to float32 before choosing a token; the fixture's
  greedy logits are taken from the model output itself.
* Other assertions: a model built in memory from the intended values reproduces
  `logits.npy` bit for bit; the decode path agrees with one chunked forward over prompt +
  generated tokens (`decode_vs_forward_max_rel_err`); logits have row std >= 1; for MoE
  every routing decision has a gap >= 1e-3 between the k-th and (k+1)-th router logit.
  Prompts are random ids; if a margin or routing gap is not clear the next candidate
  prompt is used (`prompt_attempt`).
* The MTP tensors of `vlm` have no reference (transformers drops `mtp.*`).

## Variants
"""


def write_readme(out: Path, rows: list[dict], covers: dict[str, str]) -> None:
    lines = [README_HEAD.format(torch=torch.__version__, transformers=transformers.__version__,
                                safetensors=safetensors.__version__, numpy=np.__version__)]  # fmt: skip
    for row in rows:
        lines.append(f"* `{row['variant']}`: {covers[row['variant']]}.")
    lines.append("")
    keys = ["variant", "arch", "H", "I", "L", "pattern", "Nq/Nkv/Dh", "nk/nv", "dk/dv", "K", "V", "tied",
            "experts", "T"]  # fmt: skip
    lines.append("| " + " | ".join(keys) + " |")
    lines.append("|" + "---|" * len(keys))
    for row in rows:
        lines.append("| " + " | ".join(str(row[k]) for k in keys) + " |")
    lines.append("")
    lines.append("Pattern: L = linear_attention (Gated DeltaNet), F = full_attention. Config edits after "
                 "`save_pretrained`: `dtype` set to `bfloat16`; `full_attention_interval` added (4; it "
                 "disagrees with `layer_types` in `dense_untied`/`mixed_dtypes`, where `layer_types` must "
                 "win); `dense_odd` has no `layer_types` at all (`full_attention_interval` 3); `vlm` adds the "
                 "released text-config keys `partial_rotary_factor`, `mtp_use_dedicated_embeddings`, "
                 "`attn_output_gate`, `mamba_ssm_dtype` and `vision_config.deepstack_visual_indexes`.")
    lines.append("")
    lines.append("Measured relative L2 of unmodified transformers' logits to `logits.npy`, and the smallest "
                 "greedy margin:")
    lines.append("")
    lines.append("| variant | float64 (f32 internals) | float32 | bfloat16 | min greedy margin |")
    lines.append("|---|---|---|---|---|")
    for row in rows:
        ref = json.loads((out / row["variant"] / "reference.json").read_text())
        lines.append(f"| {row['variant']} | {ref['stock_hf_rel_l2']:.1e} | {ref['float32_hf_rel_l2']:.1e} | "
                     f"{ref['bfloat16_hf_rel_l2']:.1e} | {min(ref['greedy_margins']):.3g} |")
    lines.append("")
    lines.append("## Files")
    lines.append("")
    total = 0
    for row in rows:
        files = ", ".join(f"`{f}`" for f in row["files"])
        lines.append(f"* `{row['variant']}/` ({row['bytes'] / 1024:.0f} KiB): {files}")
        total += row["bytes"]
    lines.append("")
    lines.append(f"Total: {total / 1024 / 1024:.2f} MiB.")
    (out / "README.md").write_text("\n".join(lines) + "\n")


# --------------------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------------------


def check_environment() -> None:
    # The reference must come from the pure-torch paths: with these packages installed,
    # transformers would route the delta rule / conv / norms to their kernels.
    for package in ("fla", "causal_conv1d", "kernels"):
        if importlib.util.find_spec(package) is not None:
            sys.exit(f"package {package!r} is installed; uninstall it so the pure-torch path is used")
    for name, want in TESTED_VERSIONS.items():
        have = {"torch": torch.__version__, "transformers": transformers.__version__}[name]
        if have != want:
            print(f"warning: {name} {have} (fixtures were made with {want})", file=sys.stderr)


def build_variant(variant: Variant, out: Path) -> tuple[dict[str, torch.Tensor], Reference, StockErrors]:
    folder = out / variant.name
    stored = write_checkpoint(variant, folder)
    ref = exact_reference(variant.kind, folder, stored, variant.seed, variant.prompt_len)

    in_memory = in_memory_logits(variant, stored, ref.prompt)
    assert torch.equal(in_memory, ref.logits), f"{variant.name}: in-memory model differs from the files"

    stock = stock_errors(variant.kind, folder, ref)
    assert stock.float64 < MAX_STOCK_REL_L2, f"{variant.name}: stock transformers rel L2 {stock.float64}"
    assert stock.float64_tokens == ref.tokens, f"{variant.name}: stock transformers greedy tokens differ"
    assert stock.float32 < MAX_FLOAT32_REL_L2, f"{variant.name}: float32 rel L2 {stock.float32}: ill-conditioned"

    save_reference(folder, ref, stock, NOTES)
    print(f"{variant.name}: T={len(ref.prompt)} attempt={ref.attempt} min margin={min(ref.margins):.3g} "
          f"rel L2 of transformers f64/f32/bf16 = {stock.float64:.1e}/{stock.float32:.1e}/{stock.bfloat16:.1e} "
          f"decode rel={ref.decode_rel_err:.1e}"
          + (f" router gap={ref.router_min_gap:.3g}" if ref.router_min_gap is not None else ""))  # fmt: skip
    return stored, ref, stock


def build_derived(name: str, base: Variant, stored: dict, base_ref: Reference, stock: StockErrors,
                  out: Path) -> None:
    folder = out / name
    if name == "sharded":
        copy_checkpoint(out / base.name, folder, stored, shards=3)
    else:
        copy_checkpoint(out / base.name, folder, split_experts(stored))
    ref = exact_reference(base.kind, folder, stored, base.seed, base.prompt_len, prompt=base_ref.prompt)
    assert torch.equal(ref.logits, base_ref.logits) and ref.tokens == base_ref.tokens, name
    assert torch.equal(ref.step_logits, base_ref.step_logits), name
    ref.attempt = base_ref.attempt
    save_reference(folder, ref, stock, NOTES + f" Same weights and reference as {base.name}.")
    print(f"{name}: identical to {base.name}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="fixtures folder, e.g. tests/fixtures")
    args = parser.parse_args()
    check_environment()
    torch.set_num_threads(1)  # fixed reduction order: bit-identical reruns
    torch.use_deterministic_algorithms(True)

    args.out.mkdir(parents=True, exist_ok=True)
    names = [v.name for v in VARIANTS] + list(DERIVED)
    for name in names:  # only the folders this script owns
        shutil.rmtree(args.out / name, ignore_errors=True)

    built = {v.name: (v, *build_variant(v, args.out)) for v in VARIANTS}
    for name, (base_name, _) in DERIVED.items():
        build_derived(name, *built[base_name], args.out)

    covers = {v.name: v.covers for v in VARIANTS} | {n: c for n, (_, c) in DERIVED.items()}
    order = ["dense_tied", "sharded", "dense_untied", "mixed_dtypes", "dense_odd", "released_heads", "moe", "moe_per_expert", "moe_released",
             "vlm"]
    write_readme(args.out, [describe(n, args.out / n) for n in order], covers)


if __name__ == "__main__":
    main()
