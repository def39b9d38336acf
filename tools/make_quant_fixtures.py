#!/usr/bin/env python3
"""Build MLX affine quantized parity fixtures for qwenrt with mlx-lm's own code.

Usage (CPU only, deterministic):

    pip install mlx==0.32.4 mlx-cpu==0.32.4 mlx-lm==0.32.2   # plus torch/transformers as for make_fixtures.py
    python tools/make_quant_fixtures.py --out tests/fixtures

Per fixture (see RECIPES):
  1. a tiny random Qwen 3.5 checkpoint laid out like a released one (Qwen3_5ForConditionalGeneration:
     nested text_config, vision tower, mtp.*; tied embeddings) is written by make_fixtures.py's
     machinery;
  2. it is converted the way `mlx_lm.convert --quantize` makes mlx-community checkpoints (load_model,
     cast to the config's dtype with the model's cast_predicate, quantize_model with the recipe's
     bits / group size / predicate, save_model, save_config): mlx-lm's sanitize drops mtp.* and the
     vision tower, renames to language_model.model.*, moves conv1d to [C, K, 1] and bakes (1 + w) into
     the zero-centred norms; the fixture folder holds exactly what mlx-lm wrote;
  3. the reference model is built from what mlx-lm wrote: every quantized matrix dequantized by
     mlx.core.dequantize with its scales and biases widened to float32 (exact: the result is
     fl32(scale * q + bias), the value qwenrt's kernels use), every other tensor as stored, the
     norms' baked 1 + w taken back to w (exact in float64), conv1d back to [C, 1, K]; that float64
     Hugging Face checkpoint is run by make_fixtures.exact_reference (transformers with its float32
     casts widened to float64), independent of qwenrt;
  4. writes logits.npy, greedy_logits.npy, reference.json (as make_fixtures.py) and dequant_*.npy:
     mlx's float32 dequantization of a few matrices, for the bit-exact unpacking tests.
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
import mlx.core as mx  # noqa: E402
import mlx_lm  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
from mlx.utils import tree_map_with_path  # noqa: E402
from mlx_lm.convert import MODEL_CONVERSION_DTYPES, mixed_quant_predicate_builder  # noqa: E402
from mlx_lm.utils import load_model, quantize_model, save_config, save_model  # noqa: E402
from safetensors.torch import save_file  # noqa: E402

LIN, FULL = mf.LIN, mf.FULL

# Every projection's input width is a multiple of 64, so g32 and g64 quantize every matrix.
TEXT = dict(
    vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=4,
    layer_types=[LIN, LIN, LIN, FULL],
    num_attention_heads=4, num_key_value_heads=2, head_dim=32,
    linear_num_key_heads=2, linear_num_value_heads=4,
    linear_key_head_dim=16, linear_value_head_dim=32, linear_conv_kernel_dim=4,
    rms_norm_eps=1e-6, tie_word_embeddings=True, rope_parameters=mf.rope(1e7, 32, [2, 1, 1]),
    mtp_num_hidden_layers=1,
)  # fmt: skip

# A flat MoE (Qwen3_5MoeForCausalLM) whose every expert width is a multiple of 64. mlx-lm reads it
# as model_type qwen3_5_moe (its sanitize fuses nothing further: experts.gate_up_proj is split
# into switch_mlp.{gate,up}_proj) and its quant_predicate keeps the router and shared_expert_gate
# at 8 bits.
MOE_TEXT = dict(
    vocab_size=256, hidden_size=64, num_hidden_layers=4,
    layer_types=[LIN, LIN, LIN, FULL],
    num_attention_heads=4, num_key_value_heads=2, head_dim=32,
    linear_num_key_heads=2, linear_num_value_heads=4,
    linear_key_head_dim=16, linear_value_head_dim=32, linear_conv_kernel_dim=4,
    num_experts=8, num_experts_per_tok=2, moe_intermediate_size=64,
    shared_expert_intermediate_size=128,
    rms_norm_eps=1e-6, tie_word_embeddings=False, rope_parameters=mf.rope(1e7, 32, [2, 1, 1]),
)  # fmt: skip

BASES = {
    "vlm_tied": mf.Variant("mlx_base", "vlm", TEXT, seed=808, prompt_len=40, edit_config=mf.vlm_config_edit,
                           vision=mf.VLM_VISION, covers=""),
    "vlm_untied": mf.Variant("mlx_untied_base", "vlm", {**TEXT, "tie_word_embeddings": False}, seed=818, prompt_len=40,
                             edit_config=mf.vlm_config_edit, vision=mf.VLM_VISION, covers=""),
    "moe": mf.Variant("mlx_moe_base", "moe", MOE_TEXT, seed=828, prompt_len=40, covers=""),
}  # fmt: skip

# name: (base, bits, group size, mlx-lm mixed recipe or None, dequantized samples, what it covers)
DENSE_SAMPLES = ["language_model.model.embed_tokens", "language_model.model.layers.3.mlp.down_proj"]
RECIPES = {
    "mlx_q4_g64": ("vlm_tied", 4, 64, None, DENSE_SAMPLES, "4-bit g64 (the mlx-community default), tied quantized embedding/head"),
    "mlx_q8_g32": ("vlm_tied", 8, 32, None, DENSE_SAMPLES, "8-bit g32"),
    "mlx_q3_g64": ("vlm_tied", 3, 64, None, DENSE_SAMPLES, "3-bit g64 (elements straddle uint32 words)"),
    "mlx_mixed_3_6": ("vlm_tied", 3, 64, "mixed_3_6", DENSE_SAMPLES,
                      "mlx-lm's mixed_3_6 recipe: 6-bit v_proj/down_proj on sensitive layers, 3-bit elsewhere (per-module entries)"),
    "mlx_untied_q5_g32": ("vlm_untied", 5, 32, None, ["language_model.lm_head", "language_model.model.layers.3.mlp.down_proj"],
                          "5-bit g32, untied quantized lm_head"),
    "mlx_moe_q4_g64": ("moe", 4, 64, None,
                       ["language_model.model.layers.1.mlp.switch_mlp.down_proj", "language_model.model.layers.1.mlp.gate"],
                       "MoE: experts fused as mlx-lm's switch_mlp [E, ...] at 4-bit g64, router and shared_expert_gate at 8 bits"),
}  # fmt: skip
NORM_KEYS = (".input_layernorm.weight", ".post_attention_layernorm.weight", "model.norm.weight", ".q_norm.weight", ".k_norm.weight")


def mlx_readable(hf: Path, work: Path) -> Path:
    """The folder mlx-lm loads: a flat MoE config says model_type qwen3_5_moe_text, which mlx-lm
    knows as qwen3_5_moe (same weights, same fields)."""
    config = json.loads((hf / "config.json").read_text())
    if config.get("model_type") != "qwen3_5_moe_text":
        return hf
    out = work / f"{hf.name}_mlx_in"
    if not out.exists():
        shutil.copytree(hf, out)
        config["model_type"] = "qwen3_5_moe"
        mf.write_json(out / "config.json", config)
    return out


def mlx_convert(hf: Path, out: Path, bits: int, group_size: int, recipe: str | None) -> None:
    """What mlx_lm.convert(quantize=True) does, minus the tokenizer (the fixtures have none)."""
    model, config = load_model(hf, lazy=True)
    predicate = mixed_quant_predicate_builder(recipe, model, group_size) if recipe else None
    dtype = config.get("torch_dtype", None)
    if dtype is None and (text_config := config.get("text_config", None)):
        dtype = text_config.get("dtype", None)
    if dtype in MODEL_CONVERSION_DTYPES:
        dtype = getattr(mx, dtype)
        cast_predicate = getattr(model, "cast_predicate", lambda _: True)

        def set_dtype(k, v):
            return v.astype(dtype) if cast_predicate(k) and mx.issubdtype(v.dtype, mx.floating) else v

        model.update(tree_map_with_path(set_dtype, model.parameters()))
    model, config = quantize_model(model, config, group_size, bits, quant_predicate=predicate)
    save_model(out, model, donate_model=True)
    save_config(config, config_path=out / "config.json")
    shutil.copy(hf / "generation_config.json", out / "generation_config.json")


def f64(a: mx.array) -> torch.Tensor:
    return torch.from_numpy(np.array(a.astype(mx.float32), dtype=np.float64))


def fuse_switch_mlp(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """mlx-lm's switch_mlp.{gate,up,down}_proj back to transformers' experts.gate_up_proj / down_proj."""
    out = {}
    for name, t in state.items():
        if ".switch_mlp." not in name:
            out[name] = t
        elif name.endswith("switch_mlp.gate_proj.weight"):
            prefix = name.removesuffix("switch_mlp.gate_proj.weight")
            out[prefix + "experts.gate_up_proj"] = torch.cat([t, state[prefix + "switch_mlp.up_proj.weight"]], dim=1)
            out[prefix + "experts.down_proj"] = state[prefix + "switch_mlp.down_proj.weight"]
    return out


def dequantized(folder: Path, sample_names: list[str], flat: bool) -> tuple[dict[str, torch.Tensor], dict[str, np.ndarray]]:
    """The float64 HF-named state equivalent to what mlx-lm wrote, and the float32 dequantized samples."""
    config = json.loads((folder / "config.json").read_text())
    quant = config["quantization"]
    weights = mx.load(str(folder / "model.safetensors"))
    out, samples = {}, {}
    for name, value in weights.items():
        if name.endswith((".scales", ".biases")):
            continue
        module = name.removesuffix(".weight")
        if f"{module}.scales" in weights:
            spec = quant.get(module, quant)
            w = mx.dequantize(value, weights[f"{module}.scales"].astype(mx.float32), weights[f"{module}.biases"].astype(mx.float32),
                              group_size=spec["group_size"], bits=spec["bits"])  # fmt: skip
            assert w.dtype == mx.float32
            if module in sample_names:
                samples[module] = np.array(w)
            t = torch.from_numpy(np.array(w).astype(np.float64))
        else:
            t = f64(value)
        if name.endswith("conv1d.weight"):
            t = t.movedim(2, 1).contiguous()  # [C, K, 1] -> [C, 1, K]
        if name.endswith(NORM_KEYS):
            t = t - 1.0  # mlx-lm stored 1 + w; exact in float64
        inner = "model." if flat else "model.language_model."
        hf = name.replace("language_model.model.", inner, 1).replace("language_model.lm_head", "lm_head", 1)
        out[hf] = t
    assert set(samples) == set(sample_names), sorted(samples)
    return fuse_switch_mlp(out), samples


def build(name: str, bases: dict[str, tuple[Path, dict[str, torch.Tensor]]], out: Path, work: Path) -> dict:
    base_name, bits, group_size, recipe, sample_names, covers = RECIPES[name]
    base = BASES[base_name]
    base_hf, vision = bases[base_name]
    folder = out / name
    mlx_convert(mlx_readable(base_hf, work), folder, bits, group_size, recipe)
    state, samples = dequantized(folder, sample_names, flat=base.kind != "vlm")
    state.update(vision)
    deq = work / f"{name}_hf"
    deq.mkdir()
    shutil.copy(base_hf / "config.json", deq / "config.json")
    shutil.copy(base_hf / "generation_config.json", deq / "generation_config.json")
    save_file(state, deq / "model.safetensors", metadata={"format": "pt"})
    ref = mf.exact_reference(base.kind, deq, state, base.seed, base.prompt_len)
    stock = mf.stock_errors(base.kind, deq, ref)
    notes = (mf.NOTES + f" Weights: mlx-lm {mlx_lm.__version__} (mlx {mx.__version__}) quantized the random checkpoint ({covers});"
             " the reference runs on mlx.core.dequantize's float32 values (scales and biases widened to float32) with the"
             " norms' baked 1 + w as stored. dequant_<module>.npy: that float32 dequantization of a few matrices.")  # fmt: skip
    mf.save_reference(folder, ref, stock, notes)
    for module, w in samples.items():
        np.save(folder / f"dequant_{module.removeprefix('language_model.model.').removeprefix('language_model.')}.npy", np.ascontiguousarray(w, dtype="<f4"))
    print(f"{name}: T={len(ref.prompt)} min margin={min(ref.margins):.3g} stock f64/f32/bf16 = "
          f"{stock.float64:.1e}/{stock.float32:.1e}/{stock.bfloat16:.1e}")  # fmt: skip
    return {"name": name, "covers": covers}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="fixtures folder, e.g. tests/fixtures")
    parser.add_argument("--only", nargs="*", default=list(RECIPES), help="fixture names to build")
    args = parser.parse_args()
    mf.check_environment()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        bases = {}
        for name in args.only:
            base_name = RECIPES[name][0]
            if base_name not in bases:
                stored = mf.write_checkpoint(BASES[base_name], work / base_name)
                bases[base_name] = (work / base_name, {n: t.to(torch.float64) for n, t in stored.items() if n.startswith("model.visual.")})
            shutil.rmtree(args.out / name, ignore_errors=True)
            build(name, bases, args.out, work)


if __name__ == "__main__":
    main()
