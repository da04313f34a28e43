#!/usr/bin/env python3
"""Writes the golden file that resnet_golden_check compares ember's ResNet-18 with: torchvision's
resnet18 (10 classes) with random weights and BatchNorm statistics, a batch, its eval-mode logits,
and one training step's loss and every parameter gradient in float32 and under bf16 autocast on
the GPU (TF32 off, so float32 is float32), and in float64 on the CPU: the exact answer both
float32 runs are measured against.

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
    # float32 as IEEE float32: the older flags, and PyTorch 2.9's fp32_precision where it exists.
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    for backend in (getattr(torch.backends.cudnn, "conv", None), getattr(torch.backends.cuda, "matmul", None)):
        if backend is not None and hasattr(backend, "fp32_precision"):
            backend.fp32_precision = "ieee"
    torch.manual_seed(0)
    model = torchvision.models.resnet18(num_classes=10)
    # BatchNorm away from its identity start, so eval mode checks the statistics. It also tames
    # the gradients: at torchvision's init (weight 1, bias 0) a float32 step's gradients are
    # 3e-3 from the float64 ones (seen with PyTorch), too far for a 1e-4 comparison.
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.2, 0.2)
                m.running_mean.uniform_(-0.1, 0.1)
                m.running_var.uniform_(0.5, 2.0)
    x = torch.randn(32, 3, 96, 96)
    y = torch.randint(0, 10, (32,))
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
    m = copy.deepcopy(model).double().train()
    loss = F.cross_entropy(m(x.double()), y)
    loss.backward()
    out["f64.loss"] = loss.detach().reshape(1)
    for name, p in m.named_parameters():
        out[f"f64.grad.{name}"] = p.grad.contiguous()
    save_file(out, path)
    # PyTorch's own distance from the float64 answer, over all gradients: the floor of any check.
    exact = torch.cat([out[f"f64.grad.{n}"].flatten() for n, _ in model.named_parameters()])
    errors = []
    for prec in ("f32", "bf16"):
        g = torch.cat([out[f"{prec}.grad.{n}"].double().flatten() for n, _ in model.named_parameters()])
        errors.append(f"{prec} {((g - exact).norm() / exact.norm()).item():.2e}")
    print(f"{path}: {len(out)} tensors, f32 loss {out['f32.loss'].item():.6f}; torch vs f64 grads: {', '.join(errors)}")


if __name__ == "__main__":
    main()
