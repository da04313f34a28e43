"""PyTorch's side of the GPU op benchmarks: the same cases, sizes and timing method as
cuda_ops_bench.cpp; one JSON line each. "ms" is the steady-state time per call (calls back to back
between two CUDA events, median of 5 runs), "call_ms" the median of single calls each between its
own events (which also counts the host's time to the first launch).
    python3 torch_ops_bench.py [filter-substring]"""
import json, sys
import torch, torch.nn.functional as F

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
torch.backends.cudnn.benchmark = False  # conv_cases sets it per case
dev = "cuda"
flt = sys.argv[1] if len(sys.argv) > 1 else ""
names = {torch.bfloat16: "bf16", torch.float16: "f16", torch.float32: "f32"}


def time_ms(step, warm=5, iters=20, runs=5):
    # The warm-up calls are the profiled range (ncu --profile-from-start off), as in cuda_ops_bench.
    torch.cuda.profiler.start()
    for _ in range(warm):
        step()
    torch.cuda.profiler.stop()
    torch.cuda.synchronize()

    def between_events(calls):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(calls):
            step()
        e.record(); e.synchronize()
        return s.elapsed_time(e) / calls

    steady = sorted(between_events(iters) for _ in range(runs))[runs // 2]
    single = sorted(between_events(1) for _ in range(iters))[iters // 2]
    return steady, single


def run(name, work, unit, step):
    if flt not in name:
        return
    ms, call_ms = time_ms(step)
    print(json.dumps({"case": name, "ms": round(ms, 4), unit: round(work / ms / 1e9, 3),
                      "call_ms": round(call_ms, 4)}), flush=True)


def matmul_cases():
    for dt in (torch.bfloat16, torch.float32):
        for n in (4096, 8192):
            a, b = torch.randn(n, n, device=dev, dtype=dt), torch.randn(n, n, device=dev, dtype=dt)
            run(f"matmul {names[dt]} {n}^3", 2.0 * n**3, "tflops", lambda: a @ b)


def linear_cases():
    """BERT-base's linears at b32 s128 in bf16: forward with bias; forward plus backward."""
    tokens = 4096
    for fan_in, fan_out in ((768, 768), (768, 2304), (768, 3072), (3072, 768), (768, 30522), (768, 30528)):
        o = dict(device=dev, dtype=torch.bfloat16)
        x, w = torch.randn(tokens, fan_in, **o), torch.randn(fan_out, fan_in, **o) * 0.02
        b, g = torch.randn(fan_out, **o), torch.randn(tokens, fan_out, **o)
        shape = f"[{tokens},{fan_in}]->{fan_out}"
        flops = 2.0 * tokens * fan_in * fan_out
        run(f"linear fwd {shape} bf16", flops, "tflops", lambda: F.linear(x, w, b))
        xr, wr, br = (t.detach().requires_grad_() for t in (x, w, b))

        def fwd_bwd():
            xr.grad = wr.grad = br.grad = None
            F.linear(xr, wr, br).backward(g)

        run(f"linear fwd+bwd {shape} bf16", 3 * flops, "tflops", fwd_bwd)


def elementwise_cases():
    n = 256 << 20
    for dt in (torch.float32, torch.bfloat16):
        a, b = torch.randn(n, device=dev, dtype=dt), torch.randn(n, device=dev, dtype=dt)
        nbytes = n * a.element_size()
        run(f"add 256M {names[dt]}", 3 * nbytes, "tbps", lambda: torch.add(a, b))
        run(f"gelu 256M {names[dt]}", 2 * nbytes, "tbps", lambda: F.gelu(a))
        # Forward reads x and writes y; backward reads dy and x and writes dx: 5 passes.
        x = a.detach().requires_grad_()
        run(f"gelu fwd+bwd 256M {names[dt]}", 5 * nbytes, "tbps",
            lambda: torch.autograd.grad(F.gelu(x), (x,), b))


def dropout_cases():
    # p = 0.1 as BERT's; bytes: the forward reads x, writes out and the bool mask, the backward reads
    # the gradient and the mask and writes dx.
    n = 256 << 20
    for dt in (torch.bfloat16, torch.float32):
        x = torch.randn(n, device=dev, dtype=dt, requires_grad=True)
        dy = torch.randn_like(x)
        nbytes = n * (4.0 * x.element_size() + 2)
        run(f"dropout fwd+bwd 256M {names[dt]}", nbytes, "tbps",
            lambda: torch.autograd.grad(F.dropout(x, 0.1, training=True), (x,), dy))


def attention_cases():
    # BERT-base's attention at b32 s128 in bf16: q, k, v chunked from a packed projection, forward
    # and forward plus backward, without and with dropout (PyTorch picks its flash kernel).
    B, L, H, E = 32, 128, 12, 64
    qkv = torch.randn(B, L, 3 * H * E, device=dev, dtype=torch.bfloat16, requires_grad=True)
    go = torch.randn(B, H, L, E, device=dev, dtype=torch.bfloat16)
    def sdpa(p):
        heads = [t.view(B, L, H, E).transpose(1, 2) for t in qkv.chunk(3, -1)]
        return F.scaled_dot_product_attention(*heads, dropout_p=p)
    flops = 4.0 * B * H * L * L * E
    for p in (0.0, 0.1):
        name = f"attention b32 h12 s128 d64 bf16 p{'0.1' if p else '0'}"

        def fwd():
            with torch.no_grad():
                sdpa(p)
        run(f"sdpa fwd {name}", flops, "tflops", fwd)

        def fwd_bwd():
            qkv.grad = None
            sdpa(p).backward(go)
        run(f"sdpa fwd+bwd {name}", 3.5 * flops, "tflops", fwd_bwd)


def rowwise_cases():
    for dt in (torch.float32, torch.bfloat16):
        x = torch.randn(32768, 1024, device=dev, dtype=dt, requires_grad=True)
        dy = torch.randn_like(x)
        w = torch.randn(1024, device=dev, dtype=dt, requires_grad=True)
        b = torch.randn(1024, device=dev, dtype=dt, requires_grad=True)
        nbytes = 5.0 * x.numel() * x.element_size()
        run(f"softmax fwd+bwd [32768,1024] {names[dt]}", nbytes, "tbps",
            lambda: torch.autograd.grad(torch.softmax(x, -1), (x,), dy))
        run(f"layer_norm fwd+bwd [32768,1024] {names[dt]}", nbytes, "tbps",
            lambda: torch.autograd.grad(F.layer_norm(x, (1024,), w, b), (x, w, b), dy))
    # The bias gradient of BERT's FFN input linear at b32 s128: a column sum of [4096, 3072].
    for dt in (torch.float32, torch.bfloat16):
        g = torch.randn(4096, 3072, device=dev, dtype=dt)
        run(f"sum dim 0 [4096,3072] {names[dt]}", g.numel() * g.element_size(), "tbps", lambda: g.sum(0))
    for dt in (torch.float32, torch.bfloat16):
        x = torch.randn(4096, 32768, device=dev, dtype=dt, requires_grad=True)
        target = torch.randint(0, 32768, (4096,), device=dev)
        run(f"cross_entropy fwd+bwd [4096,32768] {names[dt]}", 3.0 * x.numel() * x.element_size(), "tbps",
            lambda: torch.autograd.grad(F.cross_entropy(x, target), (x,)))


def batch_norm_cases():
    # Training mode, bf16 input with float32 weight, bias and running stats (mixed precision);
    # 5 passes over x, as cuda_ops_bench.cpp counts.
    for cl in (False, True):
        fmt = torch.channels_last if cl else torch.contiguous_format
        x = torch.randn(128, 256, 56, 56, device=dev, dtype=torch.bfloat16).to(memory_format=fmt)
        dy = torch.randn_like(x)
        x.requires_grad_()
        w = torch.randn(256, device=dev, requires_grad=True)
        b = torch.randn(256, device=dev, requires_grad=True)
        rm, rv = torch.zeros(256, device=dev), torch.ones(256, device=dev)
        name = f"batch_norm fwd+bwd [128,256,56,56] bf16 {'NHWC' if cl else 'NCHW'}"
        run(name, 5.0 * x.numel() * x.element_size(), "tbps",
            lambda: torch.autograd.grad(F.batch_norm(x, rm, rv, w, b, True), (x, w, b), dy))


def conv_cases():
    # Every tensor channels-last on both sides; each shape with cudnn.benchmark off (PyTorch's
    # default: heuristics) and on (measured algorithms), ember's cuda::cudnn::set_benchmark alike.
    for bench in (False, True):
        torch.backends.cudnn.benchmark = bench
        for c, h, k, r, s in ((64, 56, 64, 3, 1), (64, 56, 256, 1, 1), (128, 28, 128, 3, 1),
                              (256, 14, 256, 3, 1), (512, 7, 512, 3, 1), (256, 56, 512, 1, 2)):
            n, pad = 128, r // 2
            ho = (h + 2 * pad - r) // s + 1
            cl, bf16 = torch.channels_last, torch.bfloat16
            x = torch.randn(n, c, h, h, device=dev, dtype=bf16).to(memory_format=cl).requires_grad_()
            w = torch.randn(k, c, r, r, device=dev, dtype=bf16).to(memory_format=cl).requires_grad_()
            dy = torch.randn(n, k, ho, ho, device=dev, dtype=bf16).to(memory_format=cl)
            flops = 3 * 2.0 * n * k * ho * ho * c * r * r
            run(f"conv2d fwd+bwd bf16 NHWC n128 c{c} {h}x{h} k{k} {r}x{r} s{s} benchmark={int(bench)}", flops,
                "tflops", lambda: torch.autograd.grad(F.conv2d(x, w, None, s, pad), (x, w), dy))
    torch.backends.cudnn.benchmark = False


def bert_base_shapes():
    s = [(30522, 768), (512, 768), (2, 768), (768,), (768,)]
    for _ in range(12):
        s += [(768, 768), (768,)] * 4
        s += [(768,), (768,), (3072, 768), (3072,), (768, 3072), (768,), (768,), (768,)]
    return s + [(768, 768), (768,), (2, 768), (2,)]


def adamw_cases():
    params = [torch.randn(s, device=dev, requires_grad=True) for s in bert_base_shapes()]
    for p in params:
        p.grad = torch.randn_like(p)
    opt = torch.optim.AdamW(params, lr=1e-4, fused=True)
    numel = sum(p.numel() for p in params)
    run("adamw fused step bert-base f32", 28.0 * numel, "tbps", opt.step)


if __name__ == "__main__":
    matmul_cases()
    linear_cases()
    elementwise_cases()
    dropout_cases()
    attention_cases()
    rowwise_cases()
    batch_norm_cases()
    conv_cases()
    adamw_cases()
