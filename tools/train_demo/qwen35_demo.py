"""The demo model: transformers' Qwen3_5ForCausalLM plus one MTP block, its losses, and export.

transformers implements the Qwen 3.5 text model but drops the multi-token-prediction (MTP) weights
(`_keys_to_ignore_on_load_unexpected = [r"^mtp.*"]`), so the MTP block is written here from
transformers' own pieces (Qwen3_5RMSNorm, Qwen3_5DecoderLayer), laid out exactly like a released
checkpoint (shared/reference/qwen35-model.md §7):

    mtp.fc.weight [H, 2H]            mtp.pre_fc_norm_embedding.weight [H]
    mtp.pre_fc_norm_hidden.weight [H]   mtp.layers.0.*  (one full-attention layer, dense MLP)
    mtp.norm.weight [H]              (all norms zero-centred: x̂·(1+w), like the main model's)

and computed the way vLLM and SGLang run it: for row t,
    u  = fc(concat[pre_fc_norm_embedding(embed(x[t+1])), pre_fc_norm_hidden(h[t])])
    h' = norm(layer(u, position t))        logits(x[t+2]) = lm_head(h')
where h[t] is the main model's final hidden state after its final norm (the input of lm_head),
and the embedding and the (tied) lm_head are the main model's.

Used by train.py (GPU) and check_parity.py (CPU); pure PyTorch + transformers.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file
from torch import nn
from transformers import Qwen3_5ForCausalLM, Qwen3_5TextConfig
from transformers.models.qwen3_5.modeling_qwen3_5 import Qwen3_5DecoderLayer, Qwen3_5RMSNorm


@dataclass(frozen=True)
class Dims:
    """The sizes that define a demo model (everything else is Qwen 3.5's fixed choices)."""

    vocab_size: int
    hidden_size: int = 320
    num_hidden_layers: int = 8          # 3 DeltaNet : 1 attention, so a multiple of 4
    intermediate_size: int = 640
    num_attention_heads: int = 4        # gated attention: q_proj emits query and gate per head
    num_key_value_heads: int = 2        # GQA 2:1
    head_dim: int = 64
    linear_num_key_heads: int = 2       # nk < nv: each key head serves two value heads
    linear_num_value_heads: int = 4
    linear_key_head_dim: int = 64
    linear_value_head_dim: int = 64


# Shapes (train.py --size):
#   demo     the first demo model, qwen35-demo-14m (head dims 64: the CUDA path refuses it);
#   demo16m  the released head sizes (gated attention heads of 256 with RoPE on 64, DeltaNet key and
#            value heads of 128, key heads fewer than value heads as in 9B/27B), as large as fits a
#            32 MB bf16 checkpoint with its MTP block: 15,880,752 parameters (31.8 MB) with 8,192 tokens
#            (README.md, "Shape", has the arithmetic and the choices);
#   tiny     a CPU smoke-run size with head dims 32;
#   tiny256  a CPU smoke-run size with the released head sizes (loads on every qwenrt path).
SIZES = {
    "demo": {},
    "demo16m": dict(hidden_size=384, num_hidden_layers=8, intermediate_size=512, num_attention_heads=2,
                    num_key_value_heads=1, head_dim=256, linear_num_key_heads=2, linear_num_value_heads=4,
                    linear_key_head_dim=128, linear_value_head_dim=128),
    "tiny": dict(hidden_size=64, num_hidden_layers=4, intermediate_size=128, num_attention_heads=2,
                 num_key_value_heads=1, head_dim=32, linear_num_key_heads=1, linear_num_value_heads=2,
                 linear_key_head_dim=32, linear_value_head_dim=32),
    "tiny256": dict(hidden_size=64, num_hidden_layers=4, intermediate_size=128, num_attention_heads=2,
                    num_key_value_heads=1, head_dim=256, linear_num_key_heads=1, linear_num_value_heads=2,
                    linear_key_head_dim=128, linear_value_head_dim=128),
}


def make_config(dims: Dims, special_ids: dict[str, int]) -> Qwen3_5TextConfig:
    """A Qwen3_5TextConfig with Qwen 3.5's fixed choices and `dims`' sizes."""
    assert dims.num_hidden_layers % 4 == 0
    layer_types = ["full_attention" if (i + 1) % 4 == 0 else "linear_attention" for i in range(dims.num_hidden_layers)]
    rotary_dim = int(dims.head_dim * 0.25)
    # mrope sections cover rotary_dim/2 frequency slots as Qwen's [11,11,10] covers 32; for text
    # all three position components are equal, so the split never changes the result.
    slots = rotary_dim // 2
    mrope = [11, 11, 10] if slots == 32 else [slots - 2 * (slots // 3), slots // 3, slots // 3]   # released: [11, 11, 10]
    config = Qwen3_5TextConfig(
        vocab_size=dims.vocab_size,
        hidden_size=dims.hidden_size,
        intermediate_size=dims.intermediate_size,
        num_hidden_layers=dims.num_hidden_layers,
        num_attention_heads=dims.num_attention_heads,
        num_key_value_heads=dims.num_key_value_heads,
        head_dim=dims.head_dim,
        linear_num_key_heads=dims.linear_num_key_heads,
        linear_num_value_heads=dims.linear_num_value_heads,
        linear_key_head_dim=dims.linear_key_head_dim,
        linear_value_head_dim=dims.linear_value_head_dim,
        linear_conv_kernel_dim=4,
        layer_types=layer_types,
        full_attention_interval=4,
        hidden_act="silu",
        rms_norm_eps=1e-6,
        max_position_embeddings=262144,
        rope_parameters={"rope_type": "default", "rope_theta": 10_000_000.0, "partial_rotary_factor": 0.25,
                         "mrope_section": mrope, "mrope_interleaved": True},
        attention_bias=False,
        attention_dropout=0.0,
        initializer_range=0.02,
        tie_word_embeddings=True,
        bos_token_id=special_ids["<|endoftext|>"],
        eos_token_id=special_ids["<|endoftext|>"],
        pad_token_id=special_ids["<|endoftext|>"],
        # Read by vLLM / SGLang / qwenrt (transformers keeps them as plain attributes).
        mtp_num_hidden_layers=1,
        mtp_use_dedicated_embeddings=False,
    )
    config.architectures = ["Qwen3_5ForCausalLM"]
    config.dtype = torch.bfloat16
    return config


class MultiTokenPredictor(nn.Module):
    """Qwen 3.5's MTP block (one full-attention decoder layer), predicting token t+2 at row t."""

    def __init__(self, config: Qwen3_5TextConfig):
        super().__init__()
        h = config.hidden_size
        # The layer is a main-model full-attention layer; build it from a config whose only layer
        # is one, so Qwen3_5DecoderLayer picks gated attention and layer_idx 0 is its own.
        layer_config = copy.deepcopy(config)
        layer_config.layer_types = ["full_attention"]
        self.fc = nn.Linear(2 * h, h, bias=False)
        self.pre_fc_norm_embedding = Qwen3_5RMSNorm(h, eps=config.rms_norm_eps)
        self.pre_fc_norm_hidden = Qwen3_5RMSNorm(h, eps=config.rms_norm_eps)
        self.layers = nn.ModuleList([Qwen3_5DecoderLayer(layer_config, layer_idx=0)])
        self.norm = Qwen3_5RMSNorm(h, eps=config.rms_norm_eps)

    def forward(self, hidden: torch.Tensor, next_embeds: torch.Tensor,
                position_embeddings: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        """hidden[t] = main model's post-norm hidden at t, next_embeds[t] = embedding of x[t+1].

        Returns the MTP hidden state (after mtp.norm) whose lm_head logits predict x[t+2]. The
        attention is causal over the rows given (no mask object: SDPA's is_causal path).
        """
        u = torch.cat([self.pre_fc_norm_embedding(next_embeds), self.pre_fc_norm_hidden(hidden)], dim=-1)
        u = self.fc(u)
        for layer in self.layers:
            u = layer(u, position_embeddings=position_embeddings, attention_mask=None)
        return self.norm(u)


class DemoModel(nn.Module):
    """Qwen3_5ForCausalLM (`lm`) with its MTP block (`mtp`); state names map 1:1 to the checkpoint."""

    def __init__(self, config: Qwen3_5TextConfig):
        super().__init__()
        self.config = config
        self.lm = Qwen3_5ForCausalLM(config)
        self.mtp = MultiTokenPredictor(config)
        # transformers' own initialisation for the MTP block too (normal(0.02) linears, zero norms).
        for module in self.mtp.modules():
            self.lm._init_weights(module)

    def positions(self, batch: int, length: int, like: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """RoPE cos/sin for positions 0..length-1 (text: the 3 MRoPE components are equal)."""
        ids = torch.arange(length, device=like.device)[None, None, :].expand(3, batch, -1)
        return self.lm.model.rotary_emb(like, ids)

    def forward(self, window: torch.Tensor) -> dict[str, torch.Tensor]:
        """Token window [B, T+1] -> main logits [B, T, V] (targets window[:, 1:]) and MTP logits
        [B, T-1, V] (row t predicts window[:, t+2] from the hidden at t and the token t+1)."""
        inputs = window[:, :-1]
        batch, length = inputs.shape
        hidden = self.lm.model(input_ids=inputs, use_cache=False).last_hidden_state   # post final norm
        logits = self.lm.lm_head(hidden)
        next_embeds = self.lm.model.embed_tokens(window[:, 1:-1])                     # x[t+1], t < T-1
        mtp_hidden = self.mtp(hidden[:, :-1], next_embeds, self.positions(batch, length - 1, hidden))
        return {"logits": logits, "mtp_logits": self.lm.lm_head(mtp_hidden)}


def losses(out: dict[str, torch.Tensor], window: torch.Tensor,
           weights: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Next-token loss of the main head and t+2 loss of the MTP head (float32): plain means, or
    with `weights` [B, T+1] (the weight of predicting each token of the window) weighted means."""
    main = F.cross_entropy(out["logits"].flatten(0, 1).float(), window[:, 1:].flatten(), reduction="none")
    mtp = F.cross_entropy(out["mtp_logits"].flatten(0, 1).float(), window[:, 2:].flatten(), reduction="none")
    if weights is None:
        return main.mean(), mtp.mean()
    w_main, w_mtp = weights[:, 1:].flatten(), weights[:, 2:].flatten()
    return (main * w_main).sum() / w_main.sum().clamp(min=1e-6), (mtp * w_mtp).sum() / w_mtp.sum().clamp(min=1e-6)


# ---------------------------------------------------------------------------------------------
# Checkpoint format

F32_SUFFIXES = (".linear_attn.A_log", ".linear_attn.norm.weight")   # stored F32, as Qwen 3.5 ships them


def checkpoint_tensors(model: DemoModel) -> dict[str, torch.Tensor]:
    """The model's tensors under released-checkpoint names and dtypes (tied lm_head left out)."""
    tensors = {}
    state = {**model.lm.state_dict(), **{f"mtp.{k}": v for k, v in model.mtp.state_dict().items()}}
    for name, value in state.items():
        if name == "lm_head.weight":
            continue   # tied to model.embed_tokens.weight; released tied checkpoints omit it
        dtype = torch.float32 if name.endswith(F32_SUFFIXES) else torch.bfloat16
        tensors[name] = value.detach().to("cpu", dtype).contiguous()
    return dict(sorted(tensors.items()))


def save_checkpoint(model: DemoModel, path: Path) -> None:
    save_file(checkpoint_tensors(model), str(path), metadata={"format": "pt"})


def load_checkpoint(model: DemoModel, path: Path) -> None:
    """Load a checkpoint written by save_checkpoint (every tensor must be present, none extra)."""
    tensors = load_file(str(path))
    lm_state = {k: v for k, v in tensors.items() if not k.startswith("mtp.")}
    mtp_state = {k[len("mtp."):]: v for k, v in tensors.items() if k.startswith("mtp.")}
    lm_state["lm_head.weight"] = lm_state["model.embed_tokens.weight"]
    model.lm.load_state_dict(lm_state, strict=True)
    model.mtp.load_state_dict(mtp_state, strict=True)
    model.lm.tie_weights()


def round_to_checkpoint_dtypes(model: DemoModel) -> None:
    """Round the weights in place to what the checkpoint stores (bf16, two f32 kinds), so that
    metrics measured afterwards are those of the shipped file."""
    with torch.no_grad():
        for name, value in checkpoint_tensors(model).items():
            target = model.mtp if name.startswith("mtp.") else model.lm
            key = name[len("mtp."):] if name.startswith("mtp.") else name
            target.get_parameter(key).copy_(value.to(torch.float32))


def config_json(config: Qwen3_5TextConfig) -> dict:
    """config.json as written for the checkpoint (flat text config, Qwen3_5ForCausalLM)."""
    d = config.to_dict()
    for noise in ("id2label", "label2id", "problem_type", "output_hidden_states", "return_dict",
                  "chunk_size_feed_forward", "is_encoder_decoder", "output_attentions", "_name_or_path"):
        d.pop(noise, None)
    d["dtype"] = "bfloat16"
    return dict(sorted(d.items()))


def generation_config_json(special_ids: dict[str, int]) -> dict:
    """Qwen 3.5's generation_config.json with this vocabulary's ids (stop on <|im_end|> and
    <|endoftext|>); sampling defaults suited to a small model."""
    eot, im_end = special_ids["<|endoftext|>"], special_ids["<|im_end|>"]
    return {"bos_token_id": eot, "do_sample": True, "eos_token_id": [im_end, eot], "pad_token_id": eot,
            "temperature": 0.7, "top_k": 20, "top_p": 0.95}


def build(dims: Dims, special_ids: dict[str, int], seed: int) -> DemoModel:
    """A freshly initialised model; the same seed gives the same weights on any machine (CPU init)."""
    torch.manual_seed(seed)
    config = make_config(dims, special_ids)
    config._attn_implementation = "sdpa"
    return DemoModel(config)


def load_folder(folder: Path, dtype: torch.dtype = torch.float32) -> DemoModel:
    """Load an exported model folder (config.json + model.safetensors) including the MTP block."""
    config = Qwen3_5TextConfig.from_dict(json.loads((folder / "config.json").read_text()))
    config._attn_implementation = "sdpa"
    model = DemoModel(config)
    load_checkpoint(model, folder / "model.safetensors")
    return model.to(dtype).eval()
