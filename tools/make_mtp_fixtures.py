#!/usr/bin/env python3
"""Build the float64 MTP fixtures for qwenrt: tiny random Qwen 3.5 checkpoints with an MTP block.

Usage (CPU only, deterministic; needs the base fixtures of tools/make_fixtures.py):

    python tools/make_mtp_fixtures.py --fixtures tests/fixtures

Each variant copies a base fixture (config, weights, its float64 main-model reference), adds a
seeded random MTP block (`mtp.*`, drawn with make_fixtures' rules and rounded to bf16 like the
rest) and sets `mtp_num_hidden_layers: 1`:

    mtp_dense  <- dense_untied  (untied lm_head: the MTP block uses the main head)
    mtp_moe    <- moe           (the MTP layer's MLP is MoE: fused experts, shared expert)

transformers drops `mtp.*` on load, so the MTP reference is written here, in torch float64, after
vLLM's Qwen3_5MTP / Qwen3NextMTP and SGLang's Qwen3NextForCausalLMMTP (and the demo model's
training code, tools/train_demo/qwen35_demo.py):

    h_t   = the main model's final hidden row at t, AFTER the final norm (what lm_head reads)
    u     = fc(concat[RMSNorm_zc(embed(x_{t+1}), pre_fc_norm_embedding),
                      RMSNorm_zc(h_t, pre_fc_norm_hidden)])        # embedding first
    u     = one full-attention decoder layer(u), RoPE position t, its own causal KV
    h'_t  = RMSNorm_zc(u, mtp.norm);   logits_{t+2} = lm_head(h'_t)  # the main head (tied: embedding)

A draft chain feeds h'_t back as the hidden of the next row (position t+1) with the drafted token.

Files written beside the base's:
  main_hidden.npy       float64 [T, H]: the main model's final hidden rows (after the final norm)
  mtp_logits.npy        float64 [T-1, V]: MTP logits of rows t = 0..T-2 of the prompt (h_t, x_{t+1})
  mtp_chain_logits.npy  float64 [2, V]: row T-1 = (h_{T-1}, g_1) with g_1 the main model's greedy
                        token after the prompt, then row T = (h'_{T-1}, argmax of row T-1's MTP logits)
  mtp_reference.json    prompt, chain tokens, checks, versions

Checks (asserted): the main model (transformers, exact float64 via make_fixtures.exact_float64)
reproduces the base's logits.npy (relative L2 < 1e-13); the MTP decoder layer written here equals
transformers' own decoder layer class (Qwen3_5DecoderLayer / Qwen3_5MoeDecoderLayer, exact
float64) to 1e-13 relative; every MTP parameter matters (zeroing the attention or the MLP of the
MTP layer moves its logits by >= 2%); the logits are well spread (row std >= 1).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import shutil
import sys
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from safetensors import safe_open

HERE = Path(__file__).resolve().parent
spec = importlib.util.spec_from_file_location("make_fixtures", HERE / "make_fixtures.py")
mf = importlib.util.module_from_spec(spec)
sys.modules["make_fixtures"] = mf
spec.loader.exec_module(mf)

VARIANTS = {"mtp_dense": ("dense_untied", 2901), "mtp_moe": ("moe", 2902)}
MIN_EFFECT = 0.02


def read_tensors(folder: Path) -> dict[str, torch.Tensor]:
    out = {}
    with safe_open(folder / "model.safetensors", "pt") as f:
        for k in f.keys():
            out[k] = f.get_tensor(k)
    return out


def mtp_names_and_shapes(cfg: dict, base: dict[str, torch.Tensor]) -> list[tuple[str, tuple[int, ...]]]:
    """fc, the two pre-fc norms, mtp.norm, and one full-attention layer named like the base's
    first full-attention layer (dense or MoE MLP alike)."""
    h = cfg["hidden_size"]
    full = cfg["layer_types"].index("full_attention")
    prefix = f"model.layers.{full}."
    names = [("mtp.fc.weight", (h, 2 * h)), ("mtp.pre_fc_norm_embedding.weight", (h,)),
             ("mtp.pre_fc_norm_hidden.weight", (h,)), ("mtp.norm.weight", (h,))]  # fmt: skip
    names += [("mtp.layers.0." + n[len(prefix):], tuple(t.shape)) for n, t in base.items() if n.startswith(prefix)]
    return names


# ---- the reference, float64 throughout


def rms_zc(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * (1.0 + w)


def rope_tables(positions: torch.Tensor, rotary_dim: int, theta: float) -> tuple[torch.Tensor, torch.Tensor]:
    inv_freq = 1.0 / theta ** (torch.arange(0, rotary_dim, 2, dtype=torch.float64) / rotary_dim)
    ang = positions.to(torch.float64)[:, None] * inv_freq[None, :]
    ang = torch.cat([ang, ang], dim=-1)
    return ang.cos(), ang.sin()


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x [T, heads, Dh]: rotate-half on the first rotary_dim dims."""
    r = cos.shape[-1]
    xr, xp = x[..., :r], x[..., r:]
    x1, x2 = xr[..., : r // 2], xr[..., r // 2 :]
    rot = torch.cat([-x2, x1], dim=-1)
    return torch.cat([xr * cos[:, None, :] + rot * sin[:, None, :], xp], dim=-1)


class MtpReference:
    def __init__(self, cfg: dict, w: dict[str, torch.Tensor], embed: torch.Tensor, head: torch.Tensor):
        self.c, self.w, self.embed, self.head = cfg, {k: v.double() for k, v in w.items()}, embed.double(), head.double()
        self.eps = cfg["rms_norm_eps"]
        self.zero_attention = self.zero_mlp = False

    def layer(self, u: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        c, w, eps = self.c, self.w, self.eps
        p = "mtp.layers.0."
        T, Nq, Nkv, Dh = u.shape[0], c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]
        x = rms_zc(u, w[p + "input_layernorm.weight"], eps)
        qg = (x @ w[p + "self_attn.q_proj.weight"].T).view(T, Nq, 2 * Dh)  # per head: Dh query, Dh gate
        q, gate = qg[..., :Dh], qg[..., Dh:]
        k = (x @ w[p + "self_attn.k_proj.weight"].T).view(T, Nkv, Dh)
        v = (x @ w[p + "self_attn.v_proj.weight"].T).view(T, Nkv, Dh)
        q = rms_zc(q, w[p + "self_attn.q_norm.weight"], eps)
        k = rms_zc(k, w[p + "self_attn.k_norm.weight"], eps)
        rotary = int(Dh * c["rope_parameters"]["partial_rotary_factor"])
        cos, sin = rope_tables(positions, rotary, c["rope_parameters"]["rope_theta"])
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        k = k.repeat_interleave(Nq // Nkv, dim=1)
        v = v.repeat_interleave(Nq // Nkv, dim=1)
        scores = torch.einsum("qhd,khd->hqk", q, k) / Dh**0.5
        causal = torch.ones(T, T, dtype=torch.bool).tril()
        scores = scores.masked_fill(~causal, float("-inf"))
        o = torch.einsum("hqk,khd->qhd", scores.softmax(-1), v) * torch.sigmoid(gate)
        if not self.zero_attention:
            u = u + o.reshape(T, Nq * Dh) @ w[p + "self_attn.o_proj.weight"].T
        x = rms_zc(u, w[p + "post_attention_layernorm.weight"], eps)
        if not self.zero_mlp:
            u = u + self.mlp(x)
        return u

    def mlp(self, x: torch.Tensor) -> torch.Tensor:
        w, p = self.w, "mtp.layers.0.mlp."
        if p + "gate_proj.weight" in w:
            return (F.silu(x @ w[p + "gate_proj.weight"].T) * (x @ w[p + "up_proj.weight"].T)) @ w[p + "down_proj.weight"].T
        E, k = self.c["num_experts"], self.c["num_experts_per_tok"]
        probs = (x @ w[p + "gate.weight"].T).softmax(-1)
        top, idx = probs.topk(k, dim=-1)
        top = top / top.sum(-1, keepdim=True)
        gu, down = w[p + "experts.gate_up_proj"], w[p + "experts.down_proj"]
        ie = gu.shape[1] // 2
        out = torch.zeros_like(x)
        for r in range(x.shape[0]):
            for j in range(k):
                e = int(idx[r, j])
                g = gu[e] @ x[r]
                out[r] += top[r, j] * (down[e] @ (F.silu(g[:ie]) * g[ie:]))
        s = p + "shared_expert."
        shared = (F.silu(x @ w[s + "gate_proj.weight"].T) * (x @ w[s + "up_proj.weight"].T)) @ w[s + "down_proj.weight"].T
        return out + torch.sigmoid(x @ w[p + "shared_expert_gate.weight"].T) * shared

    def fc_input(self, hidden: torch.Tensor, next_ids: list[int]) -> torch.Tensor:
        e = rms_zc(self.embed[next_ids], self.w["mtp.pre_fc_norm_embedding.weight"], self.eps)
        h = rms_zc(hidden, self.w["mtp.pre_fc_norm_hidden.weight"], self.eps)
        return torch.cat([e, h], dim=-1) @ self.w["mtp.fc.weight"].T

    def forward(self, hidden: torch.Tensor, next_ids: list[int], positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """MTP rows (hidden[t], next_ids[t]) at `positions`, causal among themselves from position 0."""
        u = self.layer(self.fc_input(hidden, next_ids), positions)
        out = rms_zc(u, self.w["mtp.norm.weight"], self.eps)
        return out, out @ self.head.T


def transformers_layer_check(kind: str, cfg: dict, ref: MtpReference, main_model, hidden, next_ids) -> float:
    """The layer written here against transformers' own decoder layer class, exact float64."""
    if kind == "dense":
        from transformers.models.qwen3_5.modeling_qwen3_5 import Qwen3_5DecoderLayer as Layer
        from transformers.models.qwen3_5.configuration_qwen3_5 import Qwen3_5TextConfig as Config
    else:
        from transformers.models.qwen3_5_moe.modeling_qwen3_5_moe import Qwen3_5MoeDecoderLayer as Layer
        from transformers.models.qwen3_5_moe.configuration_qwen3_5_moe import Qwen3_5MoeTextConfig as Config
    text = dict(cfg)
    text.update(num_hidden_layers=1, layer_types=["full_attention"])
    for k in ("architectures", "transformers_version", "model_type", "dtype"):
        text.pop(k, None)
    layer_config = Config(**text)
    layer_config._attn_implementation = "eager"
    layer_config._experts_implementation = "eager"
    layer = Layer(layer_config, layer_idx=0).double().eval()
    state = {k[len("mtp.layers.0."):]: v for k, v in ref.w.items() if k.startswith("mtp.layers.0.")}
    layer.load_state_dict(state, strict=True)
    T = hidden.shape[0]
    u = ref.fc_input(hidden, next_ids)
    pos = torch.arange(T)
    ids = pos[None, None, :].expand(3, 1, -1)
    cos, sin = main_model.model.rotary_emb(u[None], ids)
    mask = torch.full((T, T), float("-inf"), dtype=torch.float64).triu(1)[None, None]
    with torch.no_grad():
        theirs = layer(u[None], position_embeddings=(cos, sin), attention_mask=mask)
    theirs = theirs[0] if isinstance(theirs, tuple) else theirs
    ours = ref.layer(u, pos)
    return ((theirs[0] - ours).norm() / ours.norm()).item()


def build(name: str, base_name: str, seed: int, fixtures: Path) -> None:
    base, out = fixtures / base_name, fixtures / name
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir()
    cfg = json.loads((base / "config.json").read_text())
    cfg["mtp_num_hidden_layers"] = 1
    cfg["mtp_use_dedicated_embeddings"] = False
    kind = "moe" if cfg.get("num_experts") else "dense"
    tensors = read_tensors(base)
    mtp = mf.store(mf.random_state(mtp_names_and_shapes(cfg, tensors), seed), mf.released_dtype)
    shutil.copy(base / "generation_config.json", out / "generation_config.json")
    mf.write_json(out / "config.json", cfg)
    mf.write_safetensors(out, {**tensors, **mtp})

    base_ref = json.loads((base / "reference.json").read_text())
    prompt, greedy = base_ref["prompt"], base_ref["greedy"]
    T = len(prompt)
    with mf.exact_float64():
        model = mf.load_float64(kind, out)
        with torch.no_grad():
            hidden = model.model(input_ids=torch.tensor([prompt]), use_cache=False).last_hidden_state[0]  # after the final norm
            logits = model.lm_head(hidden)
        base_logits = torch.from_numpy(np.load(base / "logits.npy"))
        main_rel = ((logits - base_logits).norm() / base_logits.norm()).item()
        # The same computation as the base's reference (another CPU may move the last digits).
        assert main_rel < 1e-13, f"{name}: main logits differ from {base_name}'s by {main_rel}"
        head = tensors["lm_head.weight"] if "lm_head.weight" in tensors else tensors["model.embed_tokens.weight"]
        ref = MtpReference(cfg, {k: v for k, v in mtp.items()}, tensors["model.embed_tokens.weight"], head)
        layer_rel = transformers_layer_check(kind, cfg, ref, model, hidden[: T - 1], prompt[1:])
    assert layer_rel < 1e-13, f"{name}: MTP layer vs transformers' decoder layer rel {layer_rel}"

    # Prompt rows t = 0..T-2: (h_t, x_{t+1}) at position t.
    _, mtp_logits = ref.forward(hidden[: T - 1], prompt[1:], torch.arange(T - 1))
    # The draft chain after the prompt: row T-1 pairs h_{T-1} with the main model's own next token,
    # row T pairs that row's MTP output hidden with the MTP's argmax.
    rows_h, rows_ids = hidden, prompt[1:] + [greedy[0]]
    out_h, out_logits = ref.forward(rows_h, rows_ids, torch.arange(T))
    draft = int(out_logits[T - 1].argmax())
    chain_h = torch.cat([hidden, out_h[T - 1 : T]], dim=0)
    _, chain_logits = ref.forward(chain_h, rows_ids + [draft], torch.arange(T + 1))
    assert torch.allclose(chain_logits[: T - 1], mtp_logits, rtol=0, atol=1e-12), "causal rows must not see later rows"

    effects = {}
    for part in ("zero_attention", "zero_mlp"):
        setattr(ref, part, True)
        _, z = ref.forward(hidden[: T - 1], prompt[1:], torch.arange(T - 1))
        setattr(ref, part, False)
        effects[part] = ((z - mtp_logits).norm() / mtp_logits.norm()).item()
        assert effects[part] >= MIN_EFFECT, f"{name}: {part} moves the MTP logits by only {effects[part]}"
    row_std = mtp_logits.std(dim=-1).min().item()
    assert row_std >= 1.0, f"{name}: MTP logits too flat ({row_std})"

    np.save(out / "main_hidden.npy", hidden.numpy())
    np.save(out / "mtp_logits.npy", mtp_logits.numpy())
    np.save(out / "mtp_chain_logits.npy", chain_logits[T - 1 :].numpy())
    mf.write_json(out / "mtp_reference.json", {
        "base": base_name, "main_vs_base_rel_l2": main_rel, "prompt": prompt, "chain_tokens": [greedy[0], draft],
        "layer_vs_transformers_rel_l2": layer_rel, "ablation_rel_l2": effects, "min_row_std": row_std,
        "versions": {"torch": torch.__version__, "transformers": __import__("transformers").__version__},
        "convention": "row t = fc(concat[norm_e(embed(x_{t+1})), norm_h(h_t)]) at position t, h_t after the final norm; "
                      "chain rows feed back the MTP output after mtp.norm",
    })  # fmt: skip
    print(f"{name}: T={T} layer vs transformers {layer_rel:.1e} ablations {effects} draft {draft}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fixtures", type=Path, required=True, help="fixtures folder holding the base variants")
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    for name, (base, seed) in VARIANTS.items():
        build(name, base, seed, args.fixtures)
    (args.fixtures / "MTP.md").write_text(
        "# MTP fixtures (float64 oracle)\n\nGenerated by `tools/make_mtp_fixtures.py`; do not edit by hand. Regenerate with\n\n"
        "    python tools/make_mtp_fixtures.py --fixtures tests/fixtures\n\n```\n" + __doc__.split("\n\n", 3)[3] + "```\n")


if __name__ == "__main__":
    main()
