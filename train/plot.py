#!/usr/bin/env python3
"""Draws the held-out loss curves of the BF16 and FP8 runs and states the FP8-vs-BF16 gap next to
the run-to-run noise of two BF16 seeds.

    python3 train/plot.py runs/bf16-s0 runs/bf16-s1 runs/fp8-s0 --png docs/training-loss.png \
        --json labs/data/fp8-training.json
"""

import argparse
import json
import pathlib

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def read(run):
    run = pathlib.Path(run)
    log = [json.loads(line) for line in (run / "log.jsonl").read_text().splitlines()]
    return json.loads((run / "summary.json").read_text()), log


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bf16_a")
    ap.add_argument("bf16_b")
    ap.add_argument("fp8")
    ap.add_argument("--png", required=True)
    ap.add_argument("--json", required=True)
    args = ap.parse_args()
    runs = {name: read(path) for name, path in
            (("BF16, seed 0", args.bf16_a), ("BF16, seed 1", args.bf16_b), ("FP8, seed 0", args.fp8))}

    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=120)
    for (name, (summary, log)), style in zip(runs.items(), ("-", ":", "--")):
        ax.plot([e["tokens"] / 1e6 for e in log], [e["val_loss"] for e in log], style, label=name)
    ax.set_xlabel("training tokens (millions of bytes)")
    ax.set_ylabel("held-out loss (nats per byte)")
    ax.set_title("deepseek-mini on the Python docs: BF16 vs FP8 (1x128 / 128x128 scaling)")
    lows = [min(e["val_loss"] for e in log) for _, log in runs.values()]
    ax.set_ylim(min(lows) - 0.05, min(lows) + 1.2)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(args.png)

    final = {name: s["held_out_loss_run_precision"] for name, (s, _) in runs.items()}
    # The gap and the noise at the last step all three runs logged (an FP8 run stopped early by
    # a time limit is compared where it stopped, on the same learning-rate schedule).
    common = set.intersection(*({e["step"] for e in log} for _, log in runs.values()))
    last = max(common)
    a, b, f = (next(e["val_loss"] for e in log if e["step"] == last) for _, log in runs.values())
    result = {
        "final_held_out_loss": final,
        "final_held_out_loss_f32_weights": {n: s["held_out_loss_f32"] for n, (s, _) in runs.items()},
        "stopped_early_at_step": {n: s["stopped_early_at_step"] for n, (s, _) in runs.items()},
        "compared_at_step": last,
        "fp8_minus_bf16_seed0": f - a,
        "bf16_seed_noise": abs(a - b),
        "curves": {name: [[e["tokens"], round(e["val_loss"], 5)] for e in log]
                   for name, (_, log) in runs.items()},
    }
    pathlib.Path(args.json).write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "curves"}, indent=2))


if __name__ == "__main__":
    main()
