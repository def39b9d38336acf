#!/usr/bin/env python3
"""Float64 references for the CPU's int8-activation mode (qwenrt's --int8-activations).

Usage (after make_quant_fixtures.py; needs the same torch / transformers / mlx):

    python tools/make_int8_references.py --fixtures tests/fixtures

For each mlx-lm fixture with 4- or 8-bit matrices (mlx_q4_g64, mlx_q8_g32, mlx_moe_q4_g64) the
fixture's float64 transformers model (as make_quant_fixtures.py builds it: mlx.core.dequantize's
values, the same prompt) is run again with every product over a 4- or 8-bit matrix computed as the
mode defines it (backend/cpu/mlx_affine_int8.h), in float64:
    x̂ = d · round(x / d), d = max|x| / 127 per 32 columns of each input row;
    y = W · x̂ + Σ_g (b_g + c0 · s_g) · Σ_{c in g} (x_c − x̂_c)   (c0 = 8 for 4 bits, 128 for 8 bits),
which is Σ_g s_g · Σ (q − c0) · x̂ + (b_g + c0 · s_g) · Σ x. The products are found by patching
torch.nn.functional.linear (nn.Linear and the MoE experts both call it) and matching the weight's
storage. Writes int8_logits.npy ([T, V] float32, the prompt's logits) and int8_reference.json with
the definition's own distance from the exact float64 logits (logits.npy): how far rounding the
activations alone moves this model, the measure the mode's test holds qwenrt against; and how close
the run came to a rounding tie (activations of quantized embeddings sit on exact ties: x = amax / 2
is 63.5 steps), where float32 and float64 may round apart.
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
import make_quant_fixtures as mq  # noqa: E402
import mlx.core as mx  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
from safetensors.torch import save_file  # noqa: E402

FIXTURES = ("mlx_q4_g64", "mlx_q8_g32", "mlx_moe_q4_g64")
CENTRE = {4: 8.0, 8: 128.0}


def mid_values(folder: Path, flat: bool) -> dict[str, tuple[int, int, torch.Tensor]]:
    """HF weight name -> (bits, group size, b + c0·s per [row, group]) for every 4- or 8-bit matrix."""
    config = json.loads((folder / "config.json").read_text())
    quant = config["quantization"]
    weights = mx.load(str(folder / "model.safetensors"))
    out = {}
    for name in weights:
        if not name.endswith(".scales"):
            continue
        module = name.removesuffix(".scales")
        spec = quant.get(module, quant)
        if spec["bits"] not in CENTRE:
            continue
        s = mq.f64(weights[f"{module}.scales"])
        b = mq.f64(weights[f"{module}.biases"])
        inner = "model." if flat else "model.language_model."
        hf = f"{module}.weight".replace("language_model.model.", inner, 1).replace("language_model.lm_head", "lm_head", 1)
        out[hf] = (spec["bits"], spec["group_size"], b + CENTRE[spec["bits"]] * s)
    # mlx-lm's switch_mlp.{gate,up} back to transformers' fused experts.gate_up_proj (as the weights).
    for name in [n for n in out if n.endswith("switch_mlp.gate_proj.weight")]:
        prefix = name.removesuffix("switch_mlp.gate_proj.weight")
        gate, up = out.pop(name), out.pop(prefix + "switch_mlp.up_proj.weight")
        assert gate[:2] == up[:2]
        out[prefix + "experts.gate_up_proj"] = (gate[0], gate[1], torch.cat([gate[2], up[2]], dim=1))
        down = out.pop(prefix + "switch_mlp.down_proj.weight")
        out[prefix + "experts.down_proj"] = down
    return out


TIE_MARGIN = [float("inf")]  # the closest any x / d came to a rounding tie (k + 0.5), over the run


def rounded(x: torch.Tensor) -> torch.Tensor:
    blocks = x.reshape(*x.shape[:-1], -1, 32)
    d = blocks.abs().amax(dim=-1, keepdim=True) / 127
    t = blocks / torch.where(d > 0, d, 1)
    TIE_MARGIN[0] = min(TIE_MARGIN[0], ((t - torch.floor(t)) - 0.5).abs().min().item())
    q = torch.where(d > 0, torch.round(t), 0)
    return (q * d).reshape(x.shape)


def int8_logits(kind: str, deq: Path, prompt: list[int], mids: dict[str, tuple[int, int, torch.Tensor]]) -> torch.Tensor:
    with mf.exact_float64():
        model = mf.load_float64(kind, deq)
        by_storage = {}
        params = dict(model.named_parameters(remove_duplicate=False))
        for name, (bits, gs, mid) in mids.items():
            p = params[name]
            if p.dim() == 3:  # experts: one matrix per expert slice
                for e in range(p.shape[0]):
                    by_storage[(p[e].data_ptr(), tuple(p[e].shape))] = (gs, mid[e])
            else:
                by_storage[(p.data_ptr(), tuple(p.shape))] = (gs, mid)
        plain = torch.nn.functional.linear
        used = set()

        def linear(x, weight, bias=None):
            key = (weight.data_ptr(), tuple(weight.shape))
            if key not in by_storage:
                return plain(x, weight, bias)
            used.add(key)
            gs, mid = by_storage[key]
            xh = rounded(x)
            residue = (x - xh).reshape(*x.shape[:-1], -1, gs).sum(dim=-1)
            return plain(xh, weight, bias) + residue @ mid.T

        torch.nn.functional.linear = linear
        try:
            logits = mf.forward_logits(model, prompt)
        finally:
            torch.nn.functional.linear = plain
        assert used, "no product took the int8 path"
        return logits


def build(name: str, fixtures: Path, work: Path, bases: dict[str, dict[str, torch.Tensor]]) -> None:
    """As make_quant_fixtures.build makes the fixture's float64 model (the base checkpoint written
    again, deterministically, for its vision tower), without converting again."""
    base_name = mq.RECIPES[name][0]
    base = mq.BASES[base_name]
    base_dir = work / base_name
    if base_name not in bases:
        stored = mf.write_checkpoint(base, base_dir)
        bases[base_name] = {n: t.to(torch.float64) for n, t in stored.items() if n.startswith("model.visual.")}
    folder = fixtures / name
    flat = base.kind != "vlm"
    state, _ = mq.dequantized(folder, [], flat=flat)
    state.update(bases[base_name])
    deq = work / f"{name}_hf"
    deq.mkdir()
    shutil.copy(base_dir / "config.json", deq / "config.json")
    save_file(state, deq / "model.safetensors", metadata={"format": "pt"})
    ref = json.loads((folder / "reference.json").read_text())
    exact = torch.from_numpy(np.load(folder / "logits.npy").astype(np.float64))
    TIE_MARGIN[0] = float("inf")
    logits = int8_logits(base.kind, deq, ref["prompt"], mid_values(folder, flat))
    err = mf.rel_l2(logits, exact)
    np.save(folder / "int8_logits.npy", np.ascontiguousarray(logits.numpy(), dtype="<f4"))
    (folder / "int8_reference.json").write_text(json.dumps({
        "int8_activations_f64_rel_l2": err,
        "min_tie_margin": TIE_MARGIN[0],
        "notes": "int8_logits.npy: the prompt's logits with every product over a 4- or 8-bit matrix computed as qwenrt's "
                 "--int8-activations mode defines it, in float64 (tools/make_int8_references.py); "
                 "int8_activations_f64_rel_l2: their relative L2 distance from logits.npy; "
                 "min_tie_margin: the smallest distance of any x / d from a rounding tie (k + 0.5) in that run: below "
                 "~1e-3 an implementation in float32 may round such an element the other way.",
    }, indent=2) + "\n")  # fmt: skip
    print(f"{name}: int8 activations move the float64 logits by {err:.3e} (bf16: {ref['bfloat16_hf_rel_l2']:.3e})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fixtures", type=Path, required=True, help="fixtures folder, e.g. tests/fixtures")
    parser.add_argument("--only", nargs="*", default=list(FIXTURES))
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    with tempfile.TemporaryDirectory() as tmp:
        bases = {}
        for name in args.only:
            build(name, args.fixtures, Path(tmp), bases)


if __name__ == "__main__":
    main()
