#!/usr/bin/env python3
"""Loads a folder that `train_bert --task mlm --save-pretrained DIR` wrote with transformers'
BertForMaskedLM.from_pretrained, fails on any missing or unexpected key, and writes the logits it
gives (float32 on the GPU, TF32 off) for 16 tweets (the ids of tests/text/fixtures/golden_single.tsv,
cut to 48 tokens), for bert_golden_check --masked-lm to compare with ember's:

    python3 tools/golden/hf_masked_lm_reference.py DIR /tmp/mlm_reference.safetensors
    build/tools/bert_golden_check --masked-lm DIR /tmp/mlm_reference.safetensors
"""
import os
import sys

import torch
from safetensors.torch import save_file
from transformers import BertForMaskedLM


def main():
    model_dir, out = sys.argv[1], sys.argv[2]
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    model, info = BertForMaskedLM.from_pretrained(model_dir, output_loading_info=True)
    bad = {k: v for k, v in info.items() if v}
    print(f"transformers loaded {model_dir}: " + (f"FAIL {bad}" if bad else "no missing or unexpected keys"))
    here = os.path.dirname(os.path.abspath(__file__))
    rows = []
    with open(os.path.join(here, "../../tests/text/fixtures/golden_single.tsv"), encoding="utf-8") as f:
        for line in f:
            if not line.startswith("#"):
                ids = [int(t) for t in line.rstrip("\n").split("\t")[1].split()]
                rows.append(ids[:47] + [102] if len(ids) > 48 else ids)
            if len(rows) == 16:
                break
    width = max(len(r) for r in rows)
    ids = torch.tensor([r + [0] * (width - len(r)) for r in rows])
    mask = torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in rows])
    model = model.cuda().eval()
    with torch.no_grad():
        logits = model(input_ids=ids.cuda(), attention_mask=mask.cuda()).logits.float().cpu()
    save_file({"input_ids": ids, "attention_mask": mask, "logits": logits.contiguous()}, out)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
