"""Per-kernel time and DRAM traffic from `ncu --csv` output (scripts/device_check.sh NCU=1): one
row per kernel name with its launch count, mean duration, mean bytes read and written, and the
bandwidth those bytes make over that duration.
    python3 ncu_summary.py ncu.csv [more.csv ...]"""
import collections, csv, sys

METRICS = ("gpu__time_duration.sum", "dram__bytes_read.sum", "dram__bytes_write.sum")


def kernels(path):
    """[{"name": ..., metric: value}] per kernel launch from ncu --csv output (several runs may be
    appended to one file, each with its header; other lines are skipped)."""
    rows = [r for r in csv.reader(open(path)) if len(r) > 10]
    out, run, head = collections.OrderedDict(), 0, None
    for r in rows:
        if "Metric Value" in r:  # a run's header
            head, run = r, run + 1
            kid, kname, mname, mvalue = (head.index(c) for c in ("ID", "Kernel Name", "Metric Name", "Metric Value"))
            continue
        if head is None:
            continue
        k = out.setdefault((run, r[kid]), {"name": r[kname]})
        k[r[mname]] = float(r[mvalue].replace(",", ""))
    return list(out.values())


def main():
    for path in sys.argv[1:]:
        print(f"== {path}")
        by_name = collections.OrderedDict()
        for k in kernels(path):
            by_name.setdefault(k["name"], []).append(k)
        print(f"{'n':>3} {'us':>9} {'read MB':>9} {'write MB':>9} {'TB/s':>6}  kernel")
        for name, ks in by_name.items():
            mean = {m: sum(k.get(m, 0) for k in ks) / len(ks) for m in METRICS}
            ns, rd, wr = (mean[m] for m in METRICS)
            tbps = (rd + wr) / ns / 1e3 if ns else 0
            print(f"{len(ks):3d} {ns / 1e3:9.1f} {rd / 1e6:9.1f} {wr / 1e6:9.1f} {tbps:6.2f}  {name[:100]}")


if __name__ == "__main__":
    main()
