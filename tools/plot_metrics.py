#!/usr/bin/env python3
"""Plots a trainer's metrics (JSON lines, one per epoch) as a PNG: train and test loss, and the
test scores (top-1 / top-5, or accuracy and macro-F1), per epoch. More files are drawn side by side (ember against PyTorch):

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


# The test figures a trainer may write (train_resnet's, train_bert's for each task), by kind.
LOSSES = ["test_loss", "test_masked_loss"]
SCORES = [("test_top1", "top-1"), ("test_top5", "top-5"), ("test_accuracy", "accuracy"),
          ("test_macro_f1", "macro-F1"), ("test_masked_accuracy", "masked-token accuracy")]


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
    for i, path in enumerate(a.metrics):
        color = f"C{i}"  # a colour per file, a line style per figure
        rows = read(path)
        if not rows:
            raise SystemExit(f"plot_metrics: {path} has no records")
        name = os.path.basename(path)
        epochs = [r["epoch"] for r in rows]
        loss_ax.plot(epochs, [r["train_loss"] for r in rows], "-", color=color, label=f"{name} train")
        for key in LOSSES:
            if key in rows[0]:
                loss_ax.plot(epochs, [r[key] for r in rows], "--", color=color, label=f"{name} {key[5:]}")
        for (key, label), style in zip([(k, v) for k, v in SCORES if k in rows[0]], ["-", ":", "-."]):
            acc_ax.plot(epochs, [100 * r[key] for r in rows], style, color=color, label=f"{name} {label}")
    loss_ax.set(xlabel="epoch", ylabel="loss", title="loss")
    acc_ax.set(xlabel="epoch", ylabel="%", title="test scores")
    for ax in (loss_ax, acc_ax):
        ax.grid(alpha=0.3)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    print(out)


if __name__ == "__main__":
    main()
