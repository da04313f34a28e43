#!/usr/bin/env python3
"""Writes the golden file that bert_golden_check compares ember's BERT with: a transformers
BertForSequenceClassification (all-MiniLM-L6-v2's shape: 6 layers, width 384, 12 heads; random
weights, dropout 0), 128 tokenized tweets (the ids of tests/text/fixtures/golden_single.tsv, cut to
128 tokens, padded), and on the GPU (TF32 off): the encoder's hidden states, pooler output and
sentence embeddings (mean-pooled, L2-normalized, sentence-transformers' recipe) in float32 and
under bf16 autocast, and one training step's loss and gradients on 32 of them in float32.

    python3 tools/golden/torch_bert_golden.py OUT_DIR     # OUT_DIR/golden.safetensors, config.json
    build/tools/bert_golden_check OUT_DIR
"""
import os
import sys

import torch
import torch.nn.functional as F
from safetensors.torch import save_file
from transformers import BertConfig, BertForSequenceClassification


def main():
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=30522, hidden_size=384, num_hidden_layers=6, num_attention_heads=12,
                     intermediate_size=1536, hidden_act="gelu", hidden_dropout_prob=0.0,
                     attention_probs_dropout_prob=0.0, num_labels=3)
    cfg.to_json_file(os.path.join(out_dir, "config.json"))
    model = BertForSequenceClassification(cfg)
    here = os.path.dirname(os.path.abspath(__file__))
    rows = []
    with open(os.path.join(here, "../../tests/text/fixtures/golden_single.tsv"), encoding="utf-8") as f:
        for line in f:
            if line.startswith("#"):
                continue
            ids = [int(t) for t in line.rstrip("\n").split("\t")[1].split()]
            rows.append(ids[:127] + [102] if len(ids) > 128 else ids)
            if len(rows) == 128:
                break
    width = max(len(r) for r in rows)
    ids = torch.tensor([r + [0] * (width - len(r)) for r in rows])
    mask = torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in rows])
    labels = torch.arange(128) % 3
    out = {"model." + k: v.contiguous() for k, v in model.state_dict().items()}
    out.update(input_ids=ids, attention_mask=mask, labels=labels)
    dev = torch.device("cuda")
    model = model.to(dev).eval()
    ids, mask, labels = ids.to(dev), mask.to(dev), labels.to(dev)

    def embed(h):
        m = mask.unsqueeze(-1).to(h.dtype)
        return F.normalize((h * m).sum(1) / m.sum(1).clamp(min=1e-9), dim=-1)

    with torch.no_grad():
        for prec in ("f32", "bf16"):
            with torch.autocast("cuda", torch.bfloat16, enabled=prec == "bf16"):
                o = model.bert(input_ids=ids, attention_mask=mask)
            h = o.last_hidden_state.float()
            out[f"{prec}.hidden"] = h.cpu()
            out[f"{prec}.pooler"] = o.pooler_output.float().cpu()
            out[f"{prec}.embedding"] = embed(h).cpu()
    model.train()
    loss = F.cross_entropy(model(input_ids=ids[:32], attention_mask=mask[:32]).logits, labels[:32])
    loss.backward()
    out["step.loss"] = loss.detach().cpu().reshape(1)
    for name, p in model.named_parameters():
        out["step.grad." + name] = p.grad.cpu().contiguous()
    save_file(out, os.path.join(out_dir, "golden.safetensors"))
    print(f"{out_dir}: {len(out)} tensors, batch {tuple(ids.shape)}, step loss {loss.item():.6f}")


if __name__ == "__main__":
    main()
