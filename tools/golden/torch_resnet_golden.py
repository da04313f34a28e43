#!/usr/bin/env python3
"""Writes the golden file that resnet_golden_check compares ember's ResNet-18 with: torchvision's
resnet18 (10 classes) with random weights and BatchNorm statistics, a batch, its eval-mode logits,
and one training step's loss and every parameter gradient in float32 and under bf16 autocast,
all computed on the GPU (TF32 off, so float32 is float32).

    python3 tools/golden/torch_resnet_golden.py golden.safetensors
    build/tools/resnet_golden_check golden.safetensors
"""
import copy
import sys

import torch
import torch.nn.functional as F
import torchvision
from safetensors.torch import save_file


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "resnet_golden.safetensors"
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(0)
    model = torchvision.models.resnet18(num_classes=10)
    with torch.no_grad():  # BatchNorm away from its identity start, so eval mode checks the statistics
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.2, 0.2)
                m.running_mean.uniform_(-0.1, 0.1)
                m.running_var.uniform_(0.5, 2.0)
    x = torch.randn(16, 3, 64, 64)
    y = torch.randint(0, 10, (16,))
    out = {"model." + k: v.contiguous() for k, v in model.state_dict().items()}
    out["x"], out["y"] = x, y
    dev = torch.device("cuda")
    m = copy.deepcopy(model).to(dev).eval()
    with torch.no_grad():
        out["eval_logits"] = m(x.to(dev)).cpu()
    for prec in ("f32", "bf16"):
        m = copy.deepcopy(model).to(dev).train()
        with torch.autocast("cuda", torch.bfloat16, enabled=prec == "bf16"):
            loss = F.cross_entropy(m(x.to(dev)), y.to(dev))
        loss.backward()
        out[f"{prec}.loss"] = loss.detach().float().cpu().reshape(1)
        for name, p in m.named_parameters():
            out[f"{prec}.grad.{name}"] = p.grad.float().cpu().contiguous()
    save_file(out, path)
    print(f"{path}: {len(out)} tensors, f32 loss {out['f32.loss'].item():.6f}")


if __name__ == "__main__":
    main()
