"""PyTorch's side of the weak-scaling benchmark: the models, arguments and JSON line of tools/bench/scaling_bench.cpp
(see its header). One training step per iteration on synthetic data made on the device once: ResNet (torchvision's,
or the same definition below when torchvision is missing) with SGD momentum, or BERT-base (torch_transformer_bench.py's
BertLike) with AdamW; bf16 autocast; wrapped in DistributedDataParallel only when the world has more than one rank.
Rank 0 prints {"case": "scaling resnet50 bf16 b128 world N", "ms": median step ms, "samples_per_s": global}.
    torchrun --nproc-per-node N torch_scaling_bench.py [--model resnet50|bert-base] [--batch 128] [--iters 20]
    python3 torch_scaling_bench.py --device cpu --model resnet18 --batch 2 --image-size 32 --iters 1 --warmup 0
--channels-last runs the ResNet in channels-last memory (as scaling_bench --channels-last); off by default.
--cuda-graphs (world 1) captures the step with torch.cuda.graph and times its replays."""
import argparse, json, os, sys
import torch, torch.nn as nn, torch.nn.functional as F
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_transformer_bench import BertLike, captured, median_step_ms, sync  # noqa: E402


def conv3x3(cin, cout, stride=1):
    return nn.Conv2d(cin, cout, 3, stride, 1, bias=False)


def conv1x1(cin, cout, stride=1):
    return nn.Conv2d(cin, cout, 1, stride, bias=False)


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, inplanes, planes, stride=1, downsample=None):
        super().__init__()
        self.conv1, self.bn1 = conv3x3(inplanes, planes, stride), nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2, self.bn2 = conv3x3(planes, planes), nn.BatchNorm2d(planes)
        self.downsample = downsample

    def forward(self, x):
        out = self.bn2(self.conv2(self.relu(self.bn1(self.conv1(x)))))
        return self.relu(out + (x if self.downsample is None else self.downsample(x)))


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, inplanes, planes, stride=1, downsample=None):
        super().__init__()
        self.conv1, self.bn1 = conv1x1(inplanes, planes), nn.BatchNorm2d(planes)
        self.conv2, self.bn2 = conv3x3(planes, planes, stride), nn.BatchNorm2d(planes)
        self.conv3, self.bn3 = conv1x1(planes, planes * 4), nn.BatchNorm2d(planes * 4)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample

    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn3(self.conv3(self.relu(self.bn2(self.conv2(out)))))
        return self.relu(out + (x if self.downsample is None else self.downsample(x)))


class ResNet(nn.Module):
    """torchvision.models.ResNet (v1.5) with its module names, without groups, width or dilation options."""

    def __init__(self, block, layers, num_classes=1000, zero_init_residual=False):
        super().__init__()
        self.inplanes = 64
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        self.layer1 = self._make_layer(block, 64, layers[0], 1)
        self.layer2 = self._make_layer(block, 128, layers[1], 2)
        self.layer3 = self._make_layer(block, 256, layers[2], 2)
        self.layer4 = self._make_layer(block, 512, layers[3], 2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(512 * block.expansion, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
        if zero_init_residual:
            for m in self.modules():
                if isinstance(m, (Bottleneck, BasicBlock)):
                    nn.init.zeros_((m.bn3 if isinstance(m, Bottleneck) else m.bn2).weight)

    def _make_layer(self, block, planes, blocks, stride):
        downsample = None
        if stride != 1 or self.inplanes != planes * block.expansion:
            downsample = nn.Sequential(conv1x1(self.inplanes, planes * block.expansion, stride),
                                       nn.BatchNorm2d(planes * block.expansion))
        layers = [block(self.inplanes, planes, stride, downsample)]
        self.inplanes = planes * block.expansion
        layers += [block(self.inplanes, planes) for _ in range(1, blocks)]
        return nn.Sequential(*layers)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


RESNETS = {"resnet18": (BasicBlock, [2, 2, 2, 2]), "resnet34": (BasicBlock, [3, 4, 6, 3]),
           "resnet50": (Bottleneck, [3, 4, 6, 3]), "resnet101": (Bottleneck, [3, 4, 23, 3])}


def resnet(name, num_classes=1000, zero_init_residual=False):
    try:
        import torchvision
        return getattr(torchvision.models, name)(num_classes=num_classes, zero_init_residual=zero_init_residual)
    except ImportError:
        return ResNet(*RESNETS[name], num_classes=num_classes, zero_init_residual=zero_init_residual)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="resnet50", choices=[*RESNETS, "bert-base"])
    p.add_argument("--batch", type=int, default=0, help="per rank (default 128 for a ResNet, 32 for BERT)")
    for arg, default in (("seq", 128), ("image-size", 224), ("num-classes", 1000), ("layers", 12), ("d-model", 768),
                         ("heads", 12), ("ffn", 3072), ("vocab", 30522), ("warmup", 10), ("iters", 20)):
        p.add_argument("--" + arg, type=int, default=default)
    p.add_argument("--precision", default="bf16", choices=["bf16", "f32"])
    p.add_argument("--device", default="cuda")
    p.add_argument("--channels-last", action="store_true")
    p.add_argument("--cuda-graphs", action="store_true", help="capture the step (torch.cuda.graph), time replays")
    a = p.parse_args()
    bert = a.model == "bert-base"
    a.batch = a.batch or (32 if bert else 128)
    world, rank = int(os.environ.get("WORLD_SIZE", 1)), int(os.environ.get("RANK", 0))
    dev = torch.device(a.device)
    if dev.type == "cuda":
        dev = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)))
        torch.cuda.set_device(dev)
        torch.backends.cudnn.benchmark = True
    if world > 1:
        dist.init_process_group("nccl" if dev.type == "cuda" else "gloo")

    torch.manual_seed(0)
    fmt = torch.channels_last if a.channels_last else torch.contiguous_format
    if bert:
        model = BertLike(a).to(dev).train()
        ids = torch.randint(0, a.vocab, (a.batch, a.seq), device=dev)
        labels = torch.randint(0, a.vocab, (a.batch, a.seq), device=dev)
        positions = torch.arange(a.seq, device=dev)
        inputs = (ids, positions, labels)
        opt_of = lambda params: torch.optim.AdamW(params, lr=1e-4, weight_decay=0.01, fused=dev.type == "cuda",
                                                  capturable=a.cuda_graphs)
    else:
        model = resnet(a.model, a.num_classes).to(dev, memory_format=fmt).train()
        images = torch.randn(a.batch, 3, a.image_size, a.image_size, device=dev).to(memory_format=fmt)
        labels = torch.randint(0, a.num_classes, (a.batch,), device=dev)
        inputs = (images,)
        opt_of = lambda params: torch.optim.SGD(params, lr=0.1, momentum=0.9, weight_decay=1e-4,
                                                fused=dev.type == "cuda")
    if world > 1:
        model = nn.parallel.DistributedDataParallel(model, device_ids=[dev.index] if dev.type == "cuda" else None)
    opt = opt_of(model.parameters())

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=a.precision == "bf16"):
            out = model(*inputs)
            loss = out if bert else F.cross_entropy(out, labels)
        loss.backward()
        opt.step()

    timed = step
    if a.cuda_graphs:
        timed = captured(step, a.warmup)
    else:
        for _ in range(a.warmup):
            step()
    sync(dev)
    if world > 1:
        dist.barrier()
    if dev.type == "cuda":
        torch.cuda.reset_peak_memory_stats(dev)
    ms = median_step_ms(timed, a.iters, dev)
    peak = torch.cuda.max_memory_allocated(dev) / 2**20 if dev.type == "cuda" else -1
    if rank == 0:
        shape = f" s{a.seq}" if bert else " nhwc" if a.channels_last else ""
        name = f"scaling {a.model} {a.precision} b{a.batch}{shape} world {world}{' graph' if a.cuda_graphs else ''}"
        print(json.dumps(dict(case=name, ms=round(ms, 3), samples_per_s=round(world * a.batch / ms * 1000, 1),
                         peak_mib=round(peak))),
              flush=True)
    if world > 1:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
