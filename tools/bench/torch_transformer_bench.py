"""PyTorch's side of the transformer training benchmark: the model, arguments, modes and JSON lines of
tools/bench/transformer_bench.cpp (see its header). Run both in the same device call, then
    python3 compare.py ember.jsonl torch.jsonl
    python3 torch_transformer_bench.py [--layers 12] [--batch 32] [--seq 512] [--device cuda] [--modes ...]
                                       [--profile]
--profile: after the timed steps of each mode, one more step runs under torch.profiler and its key_averages
table (top 25 by CUDA time; self CPU time on the CPU) goes to stderr, as transformer_bench --profile."""
import argparse, json, sys, time
import torch, torch.nn as nn, torch.nn.functional as F
from torch.utils.checkpoint import checkpoint


class BertLike(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.tok = nn.Embedding(a.vocab, a.d_model)
        self.pos = nn.Embedding(a.seq, a.d_model)
        self.norm = nn.LayerNorm(a.d_model, eps=1e-12)
        self.drop = nn.Dropout(0.1)
        self.layers = nn.ModuleList(
            nn.TransformerEncoderLayer(a.d_model, a.heads, a.ffn, 0.1, activation="gelu", batch_first=True,
                                       norm_first=False) for _ in range(a.layers))
        self.head = nn.Linear(a.d_model, a.vocab)

    def forward(self, ids, positions, labels, ckpt=False):
        """The mean cross-entropy at every position (the loss, so that DDP's forward wraps it)."""
        x = self.drop(self.norm(self.tok(ids) + self.pos(positions)))
        for layer in self.layers:
            x = checkpoint(layer, x, use_reentrant=False) if ckpt else layer(x)
        return F.cross_entropy(self.head(x).view(-1, self.head.out_features), labels.view(-1))


def sync(dev):
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def median_step_ms(step, iters, dev):
    """Median wall time of `iters` calls of step, each synchronized (ms)."""
    times = []
    for _ in range(iters):
        start = time.perf_counter()
        step()
        sync(dev)
        times.append((time.perf_counter() - start) * 1000)
    times.sort()
    return times[len(times) // 2]


def captured(step, warmup, reset_peak=False):
    """PyTorch's whole-network capture recipe: `warmup` steps on a side stream, then one step captured with
    torch.cuda.graph; returns its replay. reset_peak: the memory peak counts from the capture."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(warmup):
            step()
    torch.cuda.current_stream().wait_stream(side)
    if reset_peak:
        torch.cuda.reset_peak_memory_stats()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step()
    return graph.replay


def profile_step(dev, name, step):
    from torch.profiler import ProfilerActivity, profile
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev.type == "cuda" else [])
    with profile(activities=activities) as prof:
        step()
        sync(dev)
    sort_by = "cuda_time_total" if dev.type == "cuda" else "self_cpu_time_total"
    print(f"== {name}: one step, ops by {sort_by}\n{prof.key_averages().table(sort_by=sort_by, row_limit=25)}",
          file=sys.stderr, flush=True)


def run_mode(a, dev, mode):
    precision, *flags = mode.split("-")
    ckpt, graphed = "ckpt" in flags, "graph" in flags
    name = f"transformer L{a.layers} b{a.batch} s{a.seq} {precision}{' ckpt' if ckpt else ''}{' graph' if graphed else ''}"
    torch.manual_seed(0)
    model = BertLike(a).to(dev).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01, fused=dev.type == "cuda",
                            capturable=graphed)
    ids = torch.randint(0, a.vocab, (a.batch, a.seq), device=dev)
    labels = torch.randint(0, a.vocab, (a.batch, a.seq), device=dev)
    positions = torch.arange(a.seq, device=dev)
    dtype = {"f32": None, "bf16": torch.bfloat16, "f16": torch.float16}[precision]
    scaler = torch.amp.GradScaler(dev.type, enabled=precision == "f16")

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast(dev.type, dtype=dtype or torch.float32, enabled=dtype is not None):
            loss = model(ids, positions, labels, ckpt)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()

    timed = step
    if graphed:
        # GradScaler's step reads found_inf on the host, so f16 cannot be captured.
        timed = captured(step, a.warmup, reset_peak=True)
    else:
        for _ in range(a.warmup):
            step()
        sync(dev)
        if dev.type == "cuda":
            torch.cuda.reset_peak_memory_stats()
    ms = median_step_ms(timed, a.iters, dev)
    if a.profile:
        profile_step(dev, name, timed)
    row = dict(case=name, ms=round(ms, 3), tokens_per_s=round(a.batch * a.seq / ms * 1000, 1))
    if dev.type == "cuda":
        row["peak_mib"] = round(torch.cuda.max_memory_allocated() / 2**20)
    print(json.dumps(row), flush=True)


def main():
    p = argparse.ArgumentParser()
    for arg, default in (("layers", 12), ("batch", 32), ("seq", 512), ("d-model", 768), ("heads", 12),
                         ("ffn", 3072), ("vocab", 30522), ("warmup", 3), ("iters", 10)):
        p.add_argument("--" + arg, type=int, default=default)
    p.add_argument("--device", default="cuda")
    p.add_argument("--modes", default="f32,f32-ckpt,bf16,bf16-ckpt,f16,f16-ckpt")
    p.add_argument("--profile", action="store_true")
    a = p.parse_args()
    # ember's float32 matmuls are true float32.
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = torch.device(a.device)
    for mode in a.modes.split(","):
        run_mode(a, dev, mode)


if __name__ == "__main__":
    main()
