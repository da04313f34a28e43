"""The weak-scaling table of scripts/multi_gpu_check.sh: samples/s of scaling_bench (ember) and
torch_scaling_bench.py (PyTorch) at world 1 and N, each side's efficiency = samples/s at N /
(N x samples/s at 1), and the ratio of the two efficiencies (above 1: ember scales better).
    python3 scaling_table.py ember.jsonl torch.jsonl N"""
import re, sys

from compare import load


def efficiency(rows, case, n):
    one, many = rows.get(f"{case} world 1"), rows.get(f"{case} world {n}")
    one, many = one and one["samples_per_s"], many and many["samples_per_s"]
    return one, many, (many / (n * one) if one and many else None)


def main():
    ours, theirs, n = load(sys.argv[1]), load(sys.argv[2]), int(sys.argv[3])
    fmt = lambda x, spec: "-" if x is None else format(x, spec)
    print(f"{'samples/s':<32} {'ember 1':>9} {f'ember {n}':>9} {'eff':>5}  {'torch 1':>9} {f'torch {n}':>9} {'eff':>5}"
          "  ratio")
    for case in dict.fromkeys(re.sub(r" world \d+$", "", c) for c in [*ours, *theirs]):
        e1, en, ee = efficiency(ours, case, n)
        t1, tn, te = efficiency(theirs, case, n)
        ratio = ee / te if ee and te else None
        print(f"{case:<32} {fmt(e1, '9.1f')} {fmt(en, '9.1f')} {fmt(ee, '5.2f')}  {fmt(t1, '9.1f')} {fmt(tn, '9.1f')} "
              f"{fmt(te, '5.2f')}  {fmt(ratio, '.2f')}")


if __name__ == "__main__":
    main()
