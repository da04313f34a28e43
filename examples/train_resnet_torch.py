#!/usr/bin/env python3
"""train_resnet's recipe in PyTorch + torchvision, the reference its accuracy and epoch time are
measured against (run both in the same device call):

    python3 examples/train_resnet_torch.py --data-dir fashion-mnist --epochs 15 --metrics torch.jsonl

Same data (the IDX files), model (torchvision's resnet18 with the small-image stem: a 3x3 stride-1
conv1 and no max-pool), augmentation (RandomCrop(28, padding=4), horizontal flip, normalization by
the training set's statistics), optimizer (SGD, Nesterov momentum 0.9, weight decay 5e-4 except on
biases and BatchNorm), schedule (linear warmup from 1% over one epoch, then cosine, per step),
label smoothing 0.1, batch 256, bf16 autocast. Writes one JSON line per epoch with train_resnet's
keys, and prints its summary lines.
"""
import argparse
import gzip
import json
import os
import time

import numpy as np
import torch
import torch.nn as nn
import torchvision
from torchvision.transforms import v2


def read_idx(path):
    with (gzip.open if path.endswith(".gz") else open)(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return torch.from_numpy(np.frombuffer(data, np.uint8, offset=4 + 4 * ndim).reshape(dims).copy())


def load_split(root, prefix):
    def find(name):
        p = os.path.join(root, name)
        return p + ".gz" if os.path.exists(p + ".gz") else p
    x = read_idx(find(f"{prefix}-images-idx3-ubyte")).unsqueeze(1)  # [N, 1, 28, 28] uint8
    y = read_idx(find(f"{prefix}-labels-idx1-ubyte")).long()
    return x, y


class Images(torch.utils.data.Dataset):
    def __init__(self, x, y, transform):
        self.x, self.y, self.transform = x, y, transform

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return self.transform(self.x[i]), self.y[i]


def param_groups(model, weight_decay):
    decay = [p for p in model.parameters() if p.ndim > 1]
    no_decay = [p for p in model.parameters() if p.ndim <= 1]
    return [{"params": no_decay, "weight_decay": 0.0}, {"params": decay, "weight_decay": weight_decay}]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--epochs", type=int, default=15)
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--weight-decay", type=float, default=5e-4)
    ap.add_argument("--label-smoothing", type=float, default=0.1)
    ap.add_argument("--warmup-epochs", type=int, default=1)
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--precision", default="bf16", choices=["f32", "bf16"])
    ap.add_argument("--channels-last", action="store_true")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--metrics", default="")
    a = ap.parse_args()

    torch.manual_seed(a.seed)
    dev = torch.device("cuda")
    xtr, ytr = load_split(a.data_dir, "train")
    xte, yte = load_split(a.data_dir, "t10k")
    mean = (xtr.double() / 255).mean().item()
    std = (xtr.double() / 255).std().item()
    norm = [v2.ToDtype(torch.float32, scale=True), v2.Normalize([mean], [std])]
    train_tf = v2.Compose([v2.RandomCrop(28, padding=4), v2.RandomHorizontalFlip()] + norm)
    test_tf = v2.Compose(norm)
    loader_args = dict(batch_size=a.batch_size, num_workers=a.workers, pin_memory=True, persistent_workers=True)
    train = torch.utils.data.DataLoader(Images(xtr, ytr, train_tf), shuffle=True, drop_last=True, **loader_args)
    test = torch.utils.data.DataLoader(Images(xte, yte, test_tf), **loader_args)

    model = torchvision.models.resnet18(num_classes=10)
    model.conv1 = nn.Conv2d(1, 64, 3, 1, 1, bias=False)
    nn.init.kaiming_normal_(model.conv1.weight, mode="fan_out", nonlinearity="relu")
    model.maxpool = nn.Identity()
    model = model.to(dev)
    memory_format = torch.channels_last if a.channels_last else torch.contiguous_format
    model = model.to(memory_format=memory_format)
    opt = torch.optim.SGD(param_groups(model, a.weight_decay), lr=a.lr, momentum=0.9, nesterov=True)
    steps = len(train)
    total = a.epochs * steps
    warmup = min(total - 1, a.warmup_epochs * steps)
    sched = torch.optim.lr_scheduler.SequentialLR(
        opt, [torch.optim.lr_scheduler.LinearLR(opt, 0.01, 1.0, warmup),
              torch.optim.lr_scheduler.CosineAnnealingLR(opt, total - warmup)], [warmup])
    criterion = nn.CrossEntropyLoss(label_smoothing=a.label_smoothing)
    autocast = a.precision == "bf16"
    log = open(a.metrics, "w") if a.metrics else None
    print(f"train_resnet_torch: resnet18 on fashion-mnist ({len(ytr)} train / {len(yte)} test), torch {torch.__version__}, "
          f"{a.precision}, batch {a.batch_size}, {steps} steps per epoch", flush=True)
    for epoch in range(a.epochs):
        model.train()
        t0 = time.perf_counter()
        loss_sum = torch.zeros((), device=dev)
        for x, y in train:
            x = x.to(dev, non_blocking=True).to(memory_format=memory_format)
            y = y.to(dev, non_blocking=True)
            with torch.autocast("cuda", torch.bfloat16, enabled=autocast):
                loss = criterion(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            loss_sum += loss.detach().float()
        train_loss = loss_sum.item() / steps
        epoch_s = time.perf_counter() - t0
        model.eval()
        sums = torch.zeros(4, dtype=torch.float64, device=dev)
        with torch.no_grad():
            for x, y in test:
                x = x.to(dev, non_blocking=True).to(memory_format=memory_format)
                y = y.to(dev, non_blocking=True)
                with torch.autocast("cuda", torch.bfloat16, enabled=autocast):
                    logits = model(x)
                logits = logits.float()
                top = logits.topk(5, 1).indices.eq(y.unsqueeze(1))
                sums += torch.stack([nn.functional.cross_entropy(logits, y, reduction="sum").double(),
                                     top[:, :1].sum().double(), top.sum().double(),
                                     torch.tensor(float(len(y)), dtype=torch.float64, device=dev)])
        s = sums.tolist()
        rec = {"epoch": epoch + 1, "step": (epoch + 1) * steps, "train_loss": train_loss, "test_loss": s[0] / s[3],
               "test_top1": s[1] / s[3], "test_top5": s[2] / s[3], "epoch_s": epoch_s,
               "img_per_s": steps * a.batch_size / epoch_s, "lr": opt.param_groups[-1]["lr"]}
        print(f"epoch {epoch + 1}/{a.epochs}: train loss {train_loss:.4f} | test loss {rec['test_loss']:.4f} "
              f"top-1 {rec['test_top1']:.4f} top-5 {rec['test_top5']:.4f} | {epoch_s:.1f} s, "
              f"{rec['img_per_s']:.0f} img/s", flush=True)
        if log:
            log.write(json.dumps(rec) + "\n")
            log.flush()


if __name__ == "__main__":
    main()
