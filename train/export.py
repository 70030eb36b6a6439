#!/usr/bin/env python3
"""Exports a trained run for the app and the tests.

    python3 train/export.py RUN_DIR --data train/data --out public/deepseek-mini-int8.safetensors \
        --fixture engine/tests/fixtures/deepseek-mini-logits.json

1. The shipped file: the block projections (attention and FFN/expert matrices) stored as int8
   with one f32 scale per 1x32 block along a row (scale = amax / 127, codes rounded half to
   even: exactly engine::quant's int8 codec), everything else f32. A quantized tensor NAME is an
   I8 tensor NAME plus an F32 tensor NAME.scales of shape [rows, cols / 32]; the metadata key
   moescope.storage says "int8-1x32". 45 MB of f32 becomes 13 MB.
2. The fixture for the Rust tests: PyTorch's f32 logits at every position of a few fixed
   prompts, and its mean loss on a few held-out windows, both computed on the int8-dequantized
   weights (what the Rust side loads), on the CPU with exact f32 matmuls.
"""

import argparse
import json
import math
import pathlib

import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file

from model import CONFIG, DeepseekMini

STORAGE_KEY = "moescope.storage"
BLOCK = 32
PROMPTS = ["The Python interpreter", "A list is a sequence", "Mixture of experts, "]
HELD_OUT_WINDOWS = 4
HELD_OUT_LEN = 128


def is_block_projection(name):
    return name.endswith(".weight") and any(
        f".{part}." in name for part in ("wq_a", "wq_b", "wkv_a", "wkv_b", "wo", "w_gate", "w_up",
                                         "w_down"))


def int8_blocks(w):
    rows, cols = w.shape
    assert cols % BLOCK == 0, f"{cols} columns are not whole 1x{BLOCK} blocks"
    t = w.reshape(rows, cols // BLOCK, BLOCK)
    scale = t.abs().amax(-1) / 127.0
    safe = torch.where(scale > 0, scale, torch.ones_like(scale))
    codes = torch.where(scale[..., None] > 0, torch.round(t / safe[..., None]), 0.0)
    codes = codes.clamp(-127, 127).to(torch.int8)
    return codes.reshape(rows, cols), scale.contiguous()


def dequantize(codes, scales):
    rows, cols = codes.shape
    return (codes.reshape(rows, cols // BLOCK, BLOCK).float() * scales[..., None]).reshape(rows, cols)


@torch.no_grad()
def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run")
    ap.add_argument("--data", default="train/data")
    ap.add_argument("--out", required=True)
    ap.add_argument("--fixture", required=True)
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False

    f32 = load_file(str(pathlib.Path(args.run) / "weights.safetensors"))
    shipped, dequantized = {}, {}
    for name, w in f32.items():
        if is_block_projection(name):
            codes, scales = int8_blocks(w)
            shipped[name], shipped[name + ".scales"] = codes, scales
            dequantized[name] = dequantize(codes, scales)
        else:
            shipped[name] = w
            dequantized[name] = w
    save_file(shipped, args.out, metadata={"moescope.config": json.dumps(CONFIG),
                                           STORAGE_KEY: "int8-1x32"})

    model = DeepseekMini()
    model.load_export(dequantized)
    model.eval()
    logits = []
    for p in PROMPTS:
        out = model(torch.tensor([list(p.encode())]))[0]
        logits.append([float(f"{v:.8g}") for v in out.flatten().tolist()])

    val = pathlib.Path(args.data, "val.txt").read_bytes()
    stride = (len(val) - HELD_OUT_LEN - 1) // HELD_OUT_WINDOWS
    windows = [list(val[i * stride:i * stride + HELD_OUT_LEN + 1]) for i in range(HELD_OUT_WINDOWS)]
    w = torch.tensor(windows)
    out = model(w[:, :-1])
    loss = F.cross_entropy(out.reshape(-1, out.shape[-1]), w[:, 1:].reshape(-1)).item()

    fixture = {
        "about": "PyTorch f32 logits of deepseek-mini on the int8-dequantized shipped weights "
                 "(train/export.py), and its mean held-out loss (nats per byte) on the windows "
                 "below, taken from the held-out split of the python3.11-doc corpus "
                 "(PSF License; Copyright (c) 2001-2023 Python Software Foundation).",
        "weights": pathlib.Path(args.out).name,
        "vocab": CONFIG["vocab_size"],
        "prompts": PROMPTS,
        "logits": logits,
        "held_out_windows": windows,
        "held_out_loss": loss,
        "held_out_ppl": math.exp(loss),
    }
    pathlib.Path(args.fixture).write_text(json.dumps(fixture) + "\n")
    print(json.dumps({"out": args.out, "bytes": pathlib.Path(args.out).stat().st_size,
                      "held_out_sample_loss": loss}))


if __name__ == "__main__":
    main()
