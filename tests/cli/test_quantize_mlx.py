#!/usr/bin/env python3
"""`qwenrt quantize` checked against mlx-lm itself: for each case, mlx-lm's own conversion of the same
checkpoint (what `mlx_lm.convert --quantize` does: load_model with its sanitize, cast to the config's
dtype, quantize_model with the same bits / group size / recipe, save) and qwenrt's output hold the
same tensors with the same bytes (so mlx's dequantize gives qwenrt's values bit for bit); mlx-lm
loads qwenrt's folder and generates; qwenrt loads it back. Exits 77 (CTest: skipped) without mlx-lm.

    QWENRT_CLI=build/dev/qwenrt python3 tests/cli/test_quantize_mlx.py
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

try:
    import mlx.core as mx
    import mlx_lm
    from mlx.utils import tree_map_with_path
    from mlx_lm.convert import MODEL_CONVERSION_DTYPES, mixed_quant_predicate_builder
    from mlx_lm.utils import load_model, quantize_model, save_model
except ImportError as e:  # pragma: no cover
    print(f"skipping: {e} (pip install mlx==0.32.4 mlx-cpu==0.32.4 mlx-lm==0.32.2)")
    sys.exit(77)

ROOT = Path(__file__).resolve().parents[2]
CLI = os.environ.get("QWENRT_CLI", str(ROOT / "build/dev/qwenrt"))
FIXTURES = ROOT / "tests/fixtures"
DEMO = ROOT / "models/qwen35-demo-16m"


def mlx_readable(src: Path, work: Path) -> Path:
    """mlx-lm knows the flat text configs' model types without the _text suffix."""
    config = json.loads((src / "config.json").read_text())
    if "text_config" in config or not config.get("model_type", "").endswith("_text"):
        return src
    out = work / f"{src.name}_mlx_in"
    shutil.copytree(src, out)
    config["model_type"] = config["model_type"].removesuffix("_text")
    (out / "config.json").write_text(json.dumps(config))
    return out


def mlx_convert(src: Path, out: Path, bits: int, group_size: int, recipe: str | None) -> None:
    """mlx_lm.convert(quantize=True), minus the tokenizer."""
    model, config = load_model(src, lazy=True)
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
    (out / "quantization.json").write_text(json.dumps(config["quantization"]))


def qwenrt(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([CLI, *args, "--threads", "2"], capture_output=True, text=True, timeout=600)


class QuantizeMatchesMlxLm(unittest.TestCase):
    def setUp(self):
        self.tmp = Path(tempfile.mkdtemp(prefix="qwenrt_quantize_"))

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def check_case(self, src: Path, bits: int, group_size: int, recipe: str | None = None):
        ours = self.tmp / "ours"
        args = ["quantize", "--model", str(src), "--out", str(ours), "--bits", str(bits), "--group-size", str(group_size)]
        if recipe:
            args += ["--recipe", recipe]
        r = qwenrt(*args)
        self.assertEqual(r.returncode, 0, r.stderr)
        theirs = self.tmp / "theirs"
        mlx_convert(mlx_readable(src, self.tmp), theirs, bits, group_size, recipe)
        a = mx.load(str(ours / "model.safetensors"))
        b = {}
        for f in sorted(theirs.glob("model*.safetensors")):
            b.update(mx.load(str(f)))
        self.assertEqual(sorted(a), sorted(b), "tensor names differ from mlx-lm's")
        for name in sorted(a):
            x, y = a[name], b[name]
            self.assertEqual((x.dtype, x.shape), (y.dtype, y.shape), name)
            self.assertTrue(mx.array_equal(x.view(mx.uint8) if x.dtype != mx.bool_ else x, y.view(mx.uint8) if y.dtype != mx.bool_ else y).item(),
                            f"{name}: bytes differ from mlx-lm's")
        # The quantization parameters mlx-lm records are the ones qwenrt wrote.
        config = json.loads((ours / "config.json").read_text())
        self.assertEqual(config["quantization"], json.loads((theirs / "quantization.json").read_text()))
        self.assertEqual(config["quantization_config"], config["quantization"])
        # mlx-lm loads qwenrt's folder as it is and runs it; qwenrt loads it too.
        model, _ = load_model(ours)
        logits = model(mx.array([[1, 2, 3, 4, 5]]))
        self.assertTrue(mx.all(mx.isfinite(logits)).item())
        info = qwenrt("info", "--model", str(ours), "--json")
        self.assertEqual(info.returncode, 0, info.stderr)
        self.assertIn(f"mlx_affine {bits}-bit g{group_size}", json.loads(info.stdout)["weight_formats"])
        return ours

    def test_vlm_layout_untied_4bit(self):
        self.check_case(FIXTURES / "vlm", 4, 64)

    def test_moe_fused_experts_8bit_g32(self):
        self.check_case(FIXTURES / "moe", 8, 32)

    def test_moe_per_expert_stacked_as_switch_mlp(self):
        # mlx-lm reads only fused experts; the same model stored per expert must give the same file.
        fused = self.check_case(FIXTURES / "moe", 4, 32)
        per_expert = self.tmp / "per_expert"
        r = qwenrt("quantize", "--model", str(FIXTURES / "moe_per_expert"), "--out", str(per_expert), "--bits", "4", "--group-size", "32")
        self.assertEqual(r.returncode, 0, r.stderr)
        a, b = mx.load(str(fused / "model.safetensors")), mx.load(str(per_expert / "model.safetensors"))
        self.assertIn("language_model.model.layers.0.mlp.switch_mlp.gate_proj.weight", b)
        self.assertEqual(sorted(a), sorted(b))
        for name in a:
            self.assertTrue(mx.array_equal(a[name].view(mx.uint8), b[name].view(mx.uint8)).item(), name)

    def test_mixed_recipe(self):
        self.check_case(FIXTURES / "dense_tied", 3, 64, "mixed_3_6")

    def test_demo_model_generates_in_mlx_lm(self):
        ours = self.check_case(DEMO, 6, 64)
        for f in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "generation_config.json"):
            self.assertTrue((ours / f).is_file(), f)
        model, tokenizer = mlx_lm.load(str(ours))
        text = mlx_lm.generate(model, tokenizer, "Once upon a time", max_tokens=12)
        self.assertGreater(len(text.strip()), 0)
        run = qwenrt("run", "--model", str(ours), "-p", "Once upon a time", "--max-tokens", "8", "--temperature", "0")
        self.assertEqual(run.returncode, 0, run.stderr)

    def test_impossible_options_are_errors(self):
        for args, words in [
            (["--bits", "7"], ["bits = 7"]),
            (["--group-size", "48"], ["group_size = 48"]),
            (["--recipe", "mixed_9_9"], ["unknown --recipe", "mixed_9_9"]),
            (["--recipe", "mixed_3_6", "--bits", "4"], ["mixed_3_6", "--bits 4"]),
        ]:
            r = qwenrt("quantize", "--model", str(FIXTURES / "dense_tied"), "--out", str(self.tmp / "x"), *args)
            self.assertNotEqual(r.returncode, 0, args)
            for w in words:
                self.assertIn(w, r.stderr, args)
        (self.tmp / "full").mkdir()
        (self.tmp / "full" / "keep.txt").write_text("mine")
        r = qwenrt("quantize", "--model", str(FIXTURES / "dense_tied"), "--out", str(self.tmp / "full"))
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("not an empty folder", r.stderr)
        r = qwenrt("quantize", "--model", str(FIXTURES / "mlx_q4_g64"), "--out", str(self.tmp / "y"))
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("already quantized", r.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
