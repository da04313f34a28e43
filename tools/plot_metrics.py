#!/usr/bin/env python3
"""Plots a trainer's metrics (JSON lines, one per epoch) as a PNG: train and test loss, and test
top-1 / top-5 accuracy, per epoch. More files are drawn side by side (ember against PyTorch):

    python3 tools/plot_metrics.py run/metrics.jsonl                  # writes run/metrics.png
    python3 tools/plot_metrics.py ember.jsonl torch.jsonl -o cmp.png

Needs matplotlib (apt-get install python3-matplotlib).
"""
import argparse
import json
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402


def read(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("metrics", nargs="+", help="JSON-lines files with epoch, train_loss, test_loss, test_top1")
    ap.add_argument("-o", "--output", help="the PNG (default: beside the first file)")
    a = ap.parse_args()
    out = a.output or os.path.splitext(a.metrics[0])[0] + ".png"
    fig, (loss_ax, acc_ax) = plt.subplots(1, 2, figsize=(11, 4))
    for path in a.metrics:
        rows = read(path)
        if not rows:
            raise SystemExit(f"plot_metrics: {path} has no records")
        name = os.path.basename(path)
        epochs = [r["epoch"] for r in rows]
        loss_ax.plot(epochs, [r["train_loss"] for r in rows], "-", label=f"{name} train")
        loss_ax.plot(epochs, [r["test_loss"] for r in rows], "--", label=f"{name} test")
        acc_ax.plot(epochs, [100 * r["test_top1"] for r in rows], "-", label=f"{name} top-1")
        if "test_top5" in rows[0]:
            acc_ax.plot(epochs, [100 * r["test_top5"] for r in rows], ":", label=f"{name} top-5")
    loss_ax.set(xlabel="epoch", ylabel="loss", title="loss")
    acc_ax.set(xlabel="epoch", ylabel="accuracy (%)", title="test accuracy")
    for ax in (loss_ax, acc_ax):
        ax.grid(alpha=0.3)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    print(out)


if __name__ == "__main__":
    main()
