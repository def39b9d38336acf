#!/usr/bin/env python3
"""A copy of a checkpoint whose MTP block can never draft well: mtp.fc zeroed, so every MTP row
is the same zero vector, its logits all zero and its draft always token 0. Speculation on it
measures the cost of drafts that are all rejected (the adaptive draft length should make it
close to plain decode).   python bench/make_unskilled_mtp.py SRC_DIR DST_DIR"""
import shutil
import sys
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

src, dst = Path(sys.argv[1]), Path(sys.argv[2])
shutil.rmtree(dst, ignore_errors=True)
shutil.copytree(src, dst)
tensors = load_file(dst / "model.safetensors")
tensors["mtp.fc.weight"] = torch.zeros_like(tensors["mtp.fc.weight"])
save_file(tensors, dst / "model.safetensors", metadata={"format": "pt"})
