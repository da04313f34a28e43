"""torch.distributed's side of allreduce_bench.cpp: the same cases, sizes and timing (the
slowest rank's mean over `iters` back-to-back in-place SUM all-reduces after a warm-up and a
barrier); rank 0 prints one JSON line per case.
    torchrun --nproc-per-node 8 torch_allreduce_bench.py [--backend nccl|gloo] [--min-bytes N]
        [--max-bytes N] [--factor F] [--iters N] [--warmup N] [--dtypes f32,bf16]"""
import argparse, json, os, time
import torch, torch.distributed as dist

p = argparse.ArgumentParser()
p.add_argument("--backend", default="nccl" if torch.cuda.is_available() else "gloo", choices=["nccl", "gloo"])
p.add_argument("--min-bytes", type=int, default=1 << 20)
p.add_argument("--max-bytes", type=int, default=1 << 30)
p.add_argument("--factor", type=int, default=4)
p.add_argument("--iters", type=int, default=20)
p.add_argument("--warmup", type=int, default=5)
p.add_argument("--dtypes", default="f32,bf16")
a = p.parse_args()

cuda = a.backend == "nccl"
if cuda:
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local_rank)
    device = torch.device("cuda", local_rank)
else:
    device = torch.device("cpu")
dist.init_process_group(a.backend)
rank, n = dist.get_rank(), dist.get_world_size()
dtypes = {"f32": torch.float32, "bf16": torch.bfloat16}


def size_name(b):
    for shift, unit in ((30, "GiB"), (20, "MiB"), (10, "KiB")):
        if b >= 1 << shift and b % (1 << shift) == 0:
            return f"{b >> shift}{unit}"
    return f"{b}B"


def sync():
    if cuda:
        torch.cuda.synchronize()


for name in a.dtypes.split(","):
    dt = dtypes[name]
    b = a.min_bytes
    while b <= a.max_bytes:
        t = torch.ones(b // torch.tensor([], dtype=dt).element_size(), dtype=dt, device=device)
        for _ in range(a.warmup):
            dist.all_reduce(t)
        sync()
        dist.barrier()
        start = time.perf_counter()
        for _ in range(a.iters):
            dist.all_reduce(t)
        sync()
        sec = torch.tensor([(time.perf_counter() - start) / a.iters], dtype=torch.float64, device=device)
        dist.all_reduce(sec, op=dist.ReduceOp.MAX)
        s = sec.item()
        algbw = t.numel() * t.element_size() / s / 1e9
        busbw = algbw * 2 * (n - 1) / n
        if rank == 0:
            print(json.dumps({"case": f"all_reduce {name} {size_name(b)} x{n}", "ms": round(s * 1e3, 4),
                              "algbw_gbps": round(algbw, 3), "busbw_gbps": round(busbw, 3)}), flush=True)
        b *= a.factor
dist.destroy_process_group()
