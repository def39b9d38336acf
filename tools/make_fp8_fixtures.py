#!/usr/bin/env python3
"""Build FP8 (Qwen's "fine-grained" block FP8) parity fixtures for qwenrt.

Usage (CPU only, deterministic):

    python tools/make_fp8_fixtures.py --out tests/fixtures

Qwen publishes FP8 checkpoints (Qwen/Qwen3.5-*-FP8) in the DeepSeek-V3 / transformers
"fine-grained FP8" layout: config.json carries

    "quantization_config": {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
                            "weight_block_size": [128, 128], "modules_to_not_convert": [...]}

and every converted linear stores `P.weight` as float8_e4m3fn [out, in] plus `P.weight_scale_inv`
[ceil(out / bo), ceil(in / bi)] (bf16 in Qwen's files, f32 in DeepSeek's), a multiplier despite
its name: W[o, i] = e4m3(P.weight[o, i]) * scale_inv[o / bo, i / bi]. The embedding, lm_head,
DeltaNet's in_proj_a / in_proj_b, the MoE router (mlp.gate), shared_expert_gate and the vision
tower stay bf16 and are listed in modules_to_not_convert.

Per fixture (see FIXTURES):
  1. a tiny random Qwen 3.5 checkpoint is written by make_fixtures.py's machinery (bf16);
  2. every other linear is quantized per block in torch: scale = amax(|W block|) / 448 (f32, then
     rounded to the scale dtype), q = (W / scale).clamp(±448).to(torch.float8_e4m3fn) (torch's
     round-to-nearest-even); MoE experts are written per expert (mlp.experts.{e}.{gate,up,down}_proj,
     the layout of Qwen's FP8 MoE releases);
  3. the dequantized weights are fl32(float(q) * float(scale)) (torch float32 multiply: exactly one
     rounding, and exact for bf16 scales), and the reference is the float64 transformers model on
     those values (make_fixtures.exact_reference), independent of qwenrt;
  4. writes logits.npy, greedy_logits.npy, reference.json (as make_fixtures.py) and dequant_*.npy:
     the float32 dequantization of a few matrices, for the bit-exact tests.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import make_fixtures as mf  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
from safetensors.torch import save_file  # noqa: E402

LIN, FULL = mf.LIN, mf.FULL
E4M3_MAX = 448.0

# Widths that are not multiples of the 128 block (hidden 192, intermediate 320), so partial
# blocks occur along both axes; untied head as in the larger released models.
DENSE_TEXT = dict(
    vocab_size=384, hidden_size=192, intermediate_size=320, num_hidden_layers=4,
    layer_types=[LIN, LIN, LIN, FULL],
    num_attention_heads=4, num_key_value_heads=2, head_dim=32,
    linear_num_key_heads=2, linear_num_value_heads=4,
    linear_key_head_dim=32, linear_value_head_dim=32, linear_conv_kernel_dim=4,
    rms_norm_eps=1e-6, tie_word_embeddings=False, rope_parameters=mf.rope(1e7, 32, [2, 1, 1]),
    mtp_num_hidden_layers=1,
)  # fmt: skip

MOE_TEXT = dict(
    vocab_size=512, hidden_size=64, num_hidden_layers=4,
    layer_types=[LIN, LIN, LIN, FULL],
    num_attention_heads=4, num_key_value_heads=2, head_dim=32,
    linear_num_key_heads=2, linear_num_value_heads=4,
    linear_key_head_dim=16, linear_value_head_dim=16, linear_conv_kernel_dim=4,
    num_experts=8, num_experts_per_tok=2, moe_intermediate_size=48,
    shared_expert_intermediate_size=80,
    rms_norm_eps=1e-6, tie_word_embeddings=False, rope_parameters=mf.rope(1e7, 32, [2, 1, 1]),
)  # fmt: skip

# name: (base variant, weight_block_size, scale dtype, what it covers)
FIXTURES = {
    "fp8_dense": (
        mf.Variant("fp8_dense_base", "vlm", DENSE_TEXT, seed=909, prompt_len=45, edit_config=mf.vlm_config_edit,
                   vision=mf.VLM_VISION, covers=""),
        [128, 128], torch.bfloat16,
        "Qwen3_5ForConditionalGeneration FP8 as Qwen releases it: 128x128 blocks, bf16 weight_scale_inv, partial "
        "blocks (H=192, I=320), bf16 embedding/lm_head/in_proj_a/in_proj_b, vision tower and mtp.* kept bf16",
    ),
    "fp8_moe": (
        mf.Variant("fp8_moe_base", "moe", MOE_TEXT, seed=919, prompt_len=48, covers=""),
        [32, 64], torch.float32,
        "Qwen3_5MoeForCausalLM FP8, experts per expert (mlp.experts.{e}.*), f32 weight_scale_inv (DeepSeek style), "
        "non-square 32x64 blocks; router and shared_expert_gate bf16",
    ),
}  # fmt: skip
DEQUANT_SAMPLES = {
    "fp8_dense": ["layers.0.linear_attn.in_proj_qkv", "layers.3.mlp.down_proj"],
    "fp8_moe": ["layers.1.mlp.experts.5.down_proj", "layers.3.self_attn.q_proj"],
}
KEEP = ("embed_tokens", "lm_head", "linear_attn.in_proj_a", "linear_attn.in_proj_b", "mlp.gate", "shared_expert_gate")


def converted(name: str, t: torch.Tensor) -> bool:
    """Whether Qwen's FP8 conversion turns this tensor into e4m3 (2-D linear weights but KEEP)."""
    if not name.endswith(".weight") or t.dim() != 2 or name.startswith(("mtp.", "model.visual.")):
        return False
    return not name.removesuffix(".weight").endswith(KEEP)


def quantize_block_fp8(w: torch.Tensor, block: list[int], scale_dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """(e4m3 weight, scale_inv) per [bo, bi] block, rounding done by torch."""
    bo, bi = block
    rows, cols = w.shape
    gr, gc = -(-rows // bo), -(-cols // bi)
    w32 = w.to(torch.float32)
    scale = torch.empty(gr, gc, dtype=torch.float32)
    for r in range(gr):
        for c in range(gc):
            amax = w32[r * bo : (r + 1) * bo, c * bi : (c + 1) * bi].abs().max()
            scale[r, c] = torch.clamp(amax, min=1e-12) / E4M3_MAX
    scale = scale.to(scale_dtype)
    full = scale.to(torch.float32).repeat_interleave(bo, 0)[:rows].repeat_interleave(bi, 1)[:, :cols]
    q = (w32 / full).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn)
    return q, scale


def dequantize_block_fp8(q: torch.Tensor, scale: torch.Tensor, block: list[int]) -> torch.Tensor:
    """fl32(float(q) * float(scale)): one float32 rounding (none for bf16 scales)."""
    bo, bi = block
    rows, cols = q.shape
    full = scale.to(torch.float32).repeat_interleave(bo, 0)[:rows].repeat_interleave(bi, 1)[:, :cols]
    return q.to(torch.float32) * full


def fuse_experts(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Per-expert matrices back to transformers' fused experts.gate_up_proj / experts.down_proj."""
    out, groups = {}, {}
    for name, t in state.items():
        parts = name.split(".")
        if "experts" in parts and parts[-1] == "weight":
            i = parts.index("experts")
            prefix, e, proj = ".".join(parts[: i + 1]), int(parts[i + 1]), parts[i + 2]
            groups.setdefault(prefix, {}).setdefault(proj, {})[e] = t
        else:
            out[name] = t
    for prefix, projs in groups.items():
        n = len(projs["down_proj"])
        out[f"{prefix}.gate_up_proj"] = torch.stack([torch.cat([projs["gate_proj"][e], projs["up_proj"][e]]) for e in range(n)])
        out[f"{prefix}.down_proj"] = torch.stack([projs["down_proj"][e] for e in range(n)])
    return out


def build(name: str, out: Path, work: Path) -> None:
    variant, block, scale_dtype, covers = FIXTURES[name]
    base = work / f"{name}_base"
    stored = mf.write_checkpoint(variant, base)
    per_tensor = mf.split_experts(stored) if variant.kind == "moe" else dict(stored)

    fp8, state, samples, not_converted = {}, {}, {}, []
    for tname, t in per_tensor.items():
        module = tname.removesuffix(".weight")
        if converted(tname, t):
            q, s = quantize_block_fp8(t, block, scale_dtype)
            fp8[tname], fp8[f"{module}.weight_scale_inv"] = q, s
            deq = dequantize_block_fp8(q, s, block)
            assert torch.isfinite(deq).all(), tname
            short = module.removeprefix("model.language_model.").removeprefix("model.")
            if short in DEQUANT_SAMPLES[name]:
                samples[short] = deq.numpy()
            state[tname] = deq.to(torch.float64)
        else:
            fp8[tname] = t
            state[tname] = t.to(torch.float64)
            if tname.endswith(".weight") and t.dim() == 2 and not tname.startswith(("mtp.", "model.visual.")):
                not_converted.append(module)
    assert set(samples) == set(DEQUANT_SAMPLES[name]), sorted(samples)
    if variant.kind == "moe":
        state = fuse_experts(state)
    if variant.kind == "vlm":
        not_converted.append("model.visual")

    folder = out / name
    folder.mkdir(parents=True)
    config = json.loads((base / "config.json").read_text())
    config["quantization_config"] = {
        "quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
        "weight_block_size": block, "modules_to_not_convert": sorted(not_converted),
    }  # fmt: skip
    mf.write_json(folder / "config.json", config)
    shutil.copy(base / "generation_config.json", folder / "generation_config.json")
    save_file(fp8, folder / "model.safetensors", metadata={"format": "pt"})

    deq = work / f"{name}_hf"
    deq.mkdir()
    shutil.copy(base / "config.json", deq / "config.json")
    shutil.copy(base / "generation_config.json", deq / "generation_config.json")
    hf_state = {n: t for n, t in state.items() if not n.startswith("mtp.")}
    save_file(hf_state, deq / "model.safetensors", metadata={"format": "pt"})
    ref = mf.exact_reference(variant.kind, deq, hf_state, variant.seed, variant.prompt_len)
    stock = mf.stock_errors(variant.kind, deq, ref)
    notes = (mf.NOTES + f" Weights: block FP8 ({covers}); e4m3 rounding by torch {torch.__version__} (float8_e4m3fn), the"
             " reference runs on the float32 dequantization fl32(e4m3 * scale_inv) of every FP8 matrix. dequant_<module>.npy:"
             " that float32 dequantization of a few matrices.")  # fmt: skip
    mf.save_reference(folder, ref, stock, notes)
    for module, w in samples.items():
        np.save(folder / f"dequant_{module}.npy", np.ascontiguousarray(w, dtype="<f4"))
    print(f"{name}: T={len(ref.prompt)} min margin={min(ref.margins):.3g} stock f64/f32/bf16 = "
          f"{stock.float64:.1e}/{stock.float32:.1e}/{stock.bfloat16:.1e}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="fixtures folder, e.g. tests/fixtures")
    parser.add_argument("--only", nargs="*", default=list(FIXTURES), help="fixture names to build")
    args = parser.parse_args()
    mf.check_environment()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.only:
            shutil.rmtree(args.out / name, ignore_errors=True)
            build(name, args.out, Path(tmp))


if __name__ == "__main__":
    main()
