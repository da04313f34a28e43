"""Prints ember's and PyTorch's benchmark lines side by side:
    python3 compare.py ember.jsonl torch.jsonl
ratio = PyTorch ms / ember ms (above 1: ember is faster). The last columns show each side's
throughput (TFLOP/s, TB/s, or bus bandwidth for allreduce_bench / torch_allreduce_bench.py), or
for training steps (transformer_bench) its peak memory. emberrun's and torchrun's "[rank 0]: "
line prefixes are skipped."""
import json, re, sys


def load(path):
    rows = {}
    for line in open(path):
        line = re.sub(r"^\[(rank )?\d+\]:\s*", "", line.strip())
        if line.startswith("{"):
            r = json.loads(line)
            rows[r["case"]] = r
    return rows


def rate(r):
    for unit, label, digits in (("tflops", "TFLOP/s", 2), ("tbps", "TB/s", 2), ("busbw_gbps", "GB/s bus", 2),
                                ("peak_mib", "MiB peak", 0)):
        if unit in r:
            return f"{r[unit]:.{digits}f} {label}"
    return r.get("error", "")[:40]


def main():
    ours, theirs = load(sys.argv[1]), load(sys.argv[2])
    cases = list(ours) + [c for c in theirs if c not in ours]
    w = max([len(c) for c in cases] + [4])
    print(f"{'case':<{w}} {'ember ms':>9} {'torch ms':>9} {'ratio':>6}  {'ember':>14} {'torch':>14}")
    for case in cases:
        a, b = ours.get(case, {}), theirs.get(case, {})
        ratio = f"{b['ms'] / a['ms']:.2f}" if "ms" in a and "ms" in b else "-"
        print(f"{case:<{w}} {a.get('ms', '-'):>9} {b.get('ms', '-'):>9} {ratio:>6}  {rate(a):>14} {rate(b):>14}")


if __name__ == "__main__":
    main()
