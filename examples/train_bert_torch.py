#!/usr/bin/env python3
"""train_bert's fine-tuning recipe in PyTorch + Hugging Face transformers, the reference its accuracy
and epoch time are measured against (run both in the same device call):

    train_bert --model M --data D --save-split split.txt ...     # ember, writes its split
    python3 examples/train_bert_torch.py --model M --data D --split split.txt --metrics torch.jsonl

Same texts on each side (the CSV rows train_bert's --save-split lists), tokenizer (transformers'
BertTokenizer.from_pretrained on the model folder, truncation to --max-length), model
(BertForSequenceClassification.from_pretrained: the pretrained encoder, a new classifier; SDPA
attention), batches (length-grouped: shuffled, cut into mega-batches of 50 batches, each sorted by
decreasing length, padded to the longest of the batch), optimizer (fused AdamW, lr 5e-5, weight
decay 0.01 except on biases and LayerNorm), schedule (get_linear_schedule_with_warmup, 10% warmup),
clipping at 1.0, bf16 autocast. Writes one JSON line per epoch with train_bert's keys and prints
its summary lines. --benchmark-steps N times N steps on one batch of full-length sequences, as
train_bert's does.
"""
import argparse
import csv
import json
import math
import time

import torch
import torch.nn.functional as F
from transformers import BertForSequenceClassification, BertTokenizer, get_linear_schedule_with_warmup


def read_split(path, n_rows):
    sides = {}
    with open(path) as f:
        for line in f:
            name, *rows = line.split()
            sides[name] = [int(r) for r in rows]
    assert sides["rows"] == [n_rows], f"{path} is a split of {sides['rows']} rows, the CSV has {n_rows}"
    return sides["train"], sides["test"]


def length_grouped(lengths, batch_size, generator, mega=50):
    order = torch.randperm(len(lengths), generator=generator).tolist()
    size = mega * batch_size
    out = []
    for start in range(0, len(order), size):
        out += sorted(order[start:start + size], key=lambda i: -lengths[i])
    batches = [out[i:i + batch_size] for i in range(0, len(out), batch_size)]
    return batches


def pad(seqs, pad_id, device):
    width = max(len(s) for s in seqs)
    ids = torch.tensor([s + [pad_id] * (width - len(s)) for s in seqs])
    mask = torch.tensor([[1] * len(s) + [0] * (width - len(s)) for s in seqs])
    return ids.to(device, non_blocking=True), mask.to(device, non_blocking=True)


def macro_f1(confusion):
    c = confusion.double()
    tp = c.diag()
    denom = c.sum(0) + c.sum(1)
    f1 = torch.where(denom > 0, 2 * tp / denom.clamp(min=1), torch.zeros_like(tp))
    return (tp.sum() / c.sum()).item(), f1.mean().item()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--split", help="train_bert's --save-split file (needed unless --benchmark-steps)")
    ap.add_argument("--text-column", default="text")
    ap.add_argument("--label-column", default="sentiment")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--max-length", type=int, default=128)
    ap.add_argument("--lr", type=float, default=5e-5)
    ap.add_argument("--weight-decay", type=float, default=0.01)
    ap.add_argument("--warmup-ratio", type=float, default=0.1)
    ap.add_argument("--max-grad-norm", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--metrics")
    ap.add_argument("--benchmark-steps", type=int, default=0)
    a = ap.parse_args()
    torch.manual_seed(a.seed)
    dev = torch.device("cuda")

    with open(a.data, encoding="utf-8", errors="replace", newline="") as f:
        rows = list(csv.DictReader(f))
    names = sorted({r[a.label_column] for r in rows})
    tok = BertTokenizer.from_pretrained(a.model)
    model = BertForSequenceClassification.from_pretrained(a.model, num_labels=len(names),
                                                          attn_implementation="sdpa").to(dev)
    decay = [p for n, p in model.named_parameters() if p.ndim > 1]
    no_decay = [p for n, p in model.named_parameters() if p.ndim <= 1]

    def make_optimizer(total):
        opt = torch.optim.AdamW([{"params": no_decay, "weight_decay": 0.0},
                                 {"params": decay, "weight_decay": a.weight_decay}], lr=a.lr, fused=True)
        return opt, get_linear_schedule_with_warmup(opt, int(a.warmup_ratio * total), total)

    def step(opt, sched, ids, mask, y):
        with torch.autocast("cuda", torch.bfloat16):
            loss = F.cross_entropy(model(input_ids=ids, attention_mask=mask).logits, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if a.max_grad_norm > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), a.max_grad_norm)
        opt.step()
        sched.step()
        return loss

    if a.benchmark_steps:
        g = torch.Generator().manual_seed(a.seed)
        ids = torch.randint(1000, model.config.vocab_size, (a.batch_size, a.max_length), generator=g)
        ids[:, 0], ids[:, -1] = tok.cls_token_id, tok.sep_token_id
        ids, mask = ids.to(dev), torch.ones_like(ids, device=dev)
        y = torch.randint(0, len(names), (a.batch_size,), generator=g).to(dev)
        opt, sched = make_optimizer(a.benchmark_steps + 11)
        model.train()
        for _ in range(11):
            loss = step(opt, sched, ids, mask, y)
        loss.item()
        t0 = time.perf_counter()
        for _ in range(a.benchmark_steps):
            loss = step(opt, sched, ids, mask, y)
        loss.item()
        ms = (time.perf_counter() - t0) * 1e3 / a.benchmark_steps
        print(f"benchmark: transformers classify bf16, batch [{a.batch_size}, {a.max_length}], "
              f"{a.benchmark_steps} steps: {ms:.3f} ms per step")
        return

    train_rows, test_rows = read_split(a.split, len(rows))

    def encode(idx):
        seqs = tok([rows[i][a.text_column] for i in idx], truncation=True, max_length=a.max_length)["input_ids"]
        return seqs, [names.index(rows[i][a.label_column]) for i in idx]

    train_x, train_y = encode(train_rows)
    test_x, test_y = encode(test_rows)
    steps_per_epoch = math.ceil(len(train_x) / a.batch_size)
    opt, sched = make_optimizer(a.epochs * steps_per_epoch)
    print(f"train_bert_torch: {a.model}, {sum(p.numel() for p in model.parameters())} parameters; "
          f"{len(train_x)} train / {len(test_x)} test texts, labels {', '.join(names)}; bf16, batch {a.batch_size}, "
          f"{steps_per_epoch} steps per epoch", flush=True)
    lengths = [len(s) for s in train_x]
    metrics = open(a.metrics, "w") if a.metrics else None
    g = torch.Generator().manual_seed(a.seed)
    step_count = 0
    for epoch in range(a.epochs):
        model.train()
        t0 = time.perf_counter()
        loss_sum = torch.zeros((), device=dev)
        tokens = 0
        batches = length_grouped(lengths, a.batch_size, g)
        for b in batches:
            ids, mask = pad([train_x[i] for i in b], tok.pad_token_id, dev)
            y = torch.tensor([train_y[i] for i in b]).to(dev, non_blocking=True)
            loss_sum += step(opt, sched, ids, mask, y).detach().float()
            tokens += ids.numel()
            step_count += 1
        train_loss = (loss_sum / len(batches)).item()
        epoch_s = time.perf_counter() - t0
        model.eval()
        confusion = torch.zeros(len(names), len(names), device=dev)
        with torch.no_grad(), torch.autocast("cuda", torch.bfloat16):
            for start in range(0, len(test_x), a.batch_size):
                ids, mask = pad(test_x[start:start + a.batch_size], tok.pad_token_id, dev)
                y = torch.tensor(test_y[start:start + a.batch_size], device=dev)
                pred = model(input_ids=ids, attention_mask=mask).logits.argmax(1)
                confusion.index_put_((y, pred), torch.ones_like(y, dtype=torch.float), accumulate=True)
        acc, f1 = macro_f1(confusion)
        print(f"epoch {epoch + 1}/{a.epochs}: train loss {train_loss:.4f} | accuracy {acc:.4f} macro_f1 {f1:.4f} | "
              f"{epoch_s:.1f} s, {len(train_x) / epoch_s:.0f} seq/s, {tokens / epoch_s:.0f} tokens/s", flush=True)
        if metrics:
            metrics.write(json.dumps({"epoch": epoch + 1, "step": step_count, "train_loss": train_loss,
                                      "test_accuracy": acc, "test_macro_f1": f1, "epoch_s": epoch_s,
                                      "lr": sched.get_last_lr()[-1]}) + "\n")
            metrics.flush()


if __name__ == "__main__":
    main()
