#!/usr/bin/env python3
"""Trains deepseek-mini (train/model.py) on the corpus of train/corpus.py, in BF16 or in emulated
FP8 with DeepSeek-V3's fine-grained scaling, and writes the f32 weights as safetensors with the
names and config metadata that engine::model::weights reads.

    python3 train/train.py --precision bf16 --seed 0 --steps 3000 --out runs/bf16-s0

Writes OUT/log.jsonl (one line per logged step: training loss, held-out loss, learning rate,
tokens seen, seconds), OUT/summary.json and OUT/weights.safetensors. Losses are in nats per byte
(the model is byte-level); perplexity is per byte.
"""

import argparse
import json
import math
import pathlib
import time

import torch
import torch.nn.functional as F
from safetensors.torch import save_file

from model import CONFIG, DeepseekMini

CONFIG_KEY = "moescope.config"


def load_bytes(path, device):
    data = pathlib.Path(path).read_bytes()
    return torch.frombuffer(bytearray(data), dtype=torch.uint8).to(device=device, dtype=torch.long)


def val_windows(val, seq):
    """Non-overlapping windows of seq + 1 bytes over the whole held-out text."""
    n = (val.numel() - 1) // seq
    idx = torch.arange(n, device=val.device)[:, None] * seq + torch.arange(seq + 1, device=val.device)
    return val[idx]


@torch.no_grad()
def evaluate(model, windows, autocast, batch=64):
    total, count = 0.0, 0
    for i in range(0, windows.shape[0], batch):
        w = windows[i:i + batch]
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=autocast):
            logits = model(w[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), w[:, 1:].reshape(-1),
                               reduction="sum")
        total += loss.item()
        count += w[:, 1:].numel()
    return total / count


@torch.no_grad()
def sample(model, prompt, n, temperature, generator):
    tokens = torch.tensor([list(prompt.encode())], device="cuda")
    for _ in range(n):
        logits = model(tokens[:, -CONFIG["max_seq_len"]:])[0, -1].float()
        if temperature == 0:
            nxt = logits.argmax()
        else:
            p = torch.softmax(logits / temperature, -1)
            nxt = torch.multinomial(p, 1, generator=generator)[0]
        tokens = torch.cat([tokens, nxt.view(1, 1)], dim=1)
    return bytes(tokens[0].tolist()).decode("utf-8", errors="replace")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--precision", choices=["bf16", "fp8"], required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--batch", type=int, default=64, help="sequences per step")
    ap.add_argument("--seq", type=int, default=CONFIG["max_seq_len"])
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--warmup", type=int, default=200)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--bias-rate", type=float, default=1e-3,
                    help="aux-loss-free balancing: bias step per update (DeepSeek-V3: 0.001)")
    ap.add_argument("--eval-every", type=int, default=100)
    ap.add_argument("--max-seconds", type=float, default=None,
                    help="stop early (and say so in summary.json) past this training time")
    ap.add_argument("--data", default="train/data")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()

    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    # Exact f32 GEMMs where f32 is asked for (the FP8 emulation and the final evaluation).
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(args.seed)
    train = load_bytes(pathlib.Path(args.data) / "train.txt", "cuda")
    val = load_bytes(pathlib.Path(args.data) / "val.txt", "cuda")
    windows = val_windows(val, args.seq)
    # A fixed quarter of the held-out windows for the curve; all of them at the end.
    curve_windows = windows[:: 4]

    model = DeepseekMini(fp8=args.precision == "fp8").cuda()
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2 and n != "embed"]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2 or n == "embed"]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95), eps=1e-8, fused=True)
    data_gen = torch.Generator(device="cuda").manual_seed(args.seed)

    def lr_at(step):
        if step < args.warmup:
            return args.lr * (step + 1) / args.warmup
        progress = (step - args.warmup) / max(1, args.steps - args.warmup)
        return args.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))

    log = open(out / "log.jsonl", "w")
    start = time.time()
    offsets_range = train.numel() - args.seq - 1
    ar = torch.arange(args.seq + 1, device="cuda")
    loads = None
    stopped_at = None
    for step in range(args.steps):
        if args.max_seconds is not None and time.time() - start > args.max_seconds:
            stopped_at = step
            break
        for g in opt.param_groups:
            g["lr"] = lr_at(step)
        starts = torch.randint(0, offsets_range, (args.batch,), device="cuda", generator=data_gen)
        batch = train[starts[:, None] + ar]
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(batch[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        with torch.no_grad():
            loads = []
            for moe in model.moe_layers():
                load = moe.load.float()
                moe.bias += args.bias_rate * torch.sign(load.mean() - load)
                loads.append(load)
        if step % args.eval_every == 0 or step == args.steps - 1:
            model.eval()
            val_loss = evaluate(model, curve_windows, autocast=True)
            model.train()
            imbalance = max((l.max() / l.mean()).item() for l in loads)
            entry = {"step": step, "train_loss": loss.item(), "val_loss": val_loss,
                     "lr": lr_at(step), "tokens": (step + 1) * args.batch * args.seq,
                     "seconds": round(time.time() - start, 1), "max_load_over_mean": imbalance}
            log.write(json.dumps(entry) + "\n")
            log.flush()
            print(args.precision, args.seed, json.dumps(entry), flush=True)

    model.eval()
    # The final held-out number in the run's own precision (what the curves show) and in f32
    # (what the exported weights give in the Rust reference).
    final_run_precision = evaluate(model, windows, autocast=True)
    fp8 = args.precision == "fp8"
    for m in model.modules():
        if hasattr(m, "fp8"):
            m.fp8 = False
    final_f32 = evaluate(model, windows, autocast=False)
    for m in model.modules():
        if hasattr(m, "fp8"):
            m.fp8 = fp8
    gen = torch.Generator(device="cuda").manual_seed(1234)
    samples = {p: sample(model, p, 160, 0.7, gen) for p in
               ("The Python interpreter", "A list is", "To open a file,")}
    summary = {
        "precision": args.precision, "seed": args.seed, "steps": args.steps,
        "stopped_early_at_step": stopped_at,
        "batch": args.batch, "seq": args.seq, "lr": args.lr,
        "tokens": (stopped_at or args.steps) * args.batch * args.seq,
        "seconds": round(time.time() - start, 1),
        "held_out_bytes": int(windows[:, 1:].numel()),
        "held_out_loss_run_precision": final_run_precision,
        "held_out_loss_f32": final_f32,
        "held_out_ppl_f32": math.exp(final_f32),
        "bits_per_byte_f32": final_f32 / math.log(2),
        "router_bias": [m.bias.tolist() for m in model.moe_layers()],
        "samples": samples,
        "torch": torch.__version__,
        "device": torch.cuda.get_device_name(),
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    save_file(model.state_for_export(), str(out / "weights.safetensors"),
              metadata={CONFIG_KEY: json.dumps(CONFIG)})
    print(json.dumps(summary, indent=2), flush=True)


if __name__ == "__main__":
    main()
