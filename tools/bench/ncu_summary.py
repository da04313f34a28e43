"""Per-kernel figures from `ncu --csv` output (scripts/device_check.sh NCU=1): one row per kernel
name with its launch count, mean duration, mean bytes read and written, the bandwidth those bytes
make over that duration, registers per thread, achieved occupancy, the SM throughput (% of
peak), the warp instructions executed and how busy the schedulers were issuing them (near 100%:
instructions, not memory, bound the kernel), and the launch's grid and block sizes.
    python3 ncu_summary.py ncu.csv [more.csv ...]
    python3 ncu_summary.py --metrics      the metric list to pass to ncu --metrics"""
import collections, csv, sys

TIME, READ, WRITE = "gpu__time_duration.sum", "dram__bytes_read.sum", "dram__bytes_write.sum"
REGS, OCCUPANCY, SM = ("launch__registers_per_thread", "sm__warps_active.avg.pct_of_peak_sustained_active",
                       "sm__throughput.avg.pct_of_peak_sustained_elapsed")
INST, ISSUE = "smsp__inst_executed.sum", "smsp__issue_active.avg.pct_of_peak_sustained_active"
GRID, BLOCK = "launch__grid_size", "launch__block_size"
METRICS = (TIME, READ, WRITE, REGS, OCCUPANCY, SM, INST, ISSUE, GRID, BLOCK)


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
        try:
            k[r[mname]] = float(r[mvalue].replace(",", ""))
        except ValueError:  # "n/a" where a metric does not apply
            pass
    return list(out.values())


def main():
    if sys.argv[1:] == ["--metrics"]:
        print(",".join(METRICS))
        return
    for path in sys.argv[1:]:
        print(f"== {path}")
        by_name = collections.OrderedDict()
        for k in kernels(path):
            by_name.setdefault(k["name"], []).append(k)
        print(f"{'n':>3} {'us':>8} {'rd MB':>7} {'wr MB':>7} {'TB/s':>5} {'regs':>4} {'occ%':>4} {'sm%':>4} {'Minst':>6} {'iss%':>4} {'grid':>7} {'block':>5}  kernel")
        for name, ks in by_name.items():
            mean = {m: sum(k.get(m, 0) for k in ks) / len(ks) for m in METRICS}
            ns, rd, wr = mean[TIME], mean[READ], mean[WRITE]
            tbps = (rd + wr) / ns / 1e3 if ns else 0
            print(f"{len(ks):3d} {ns / 1e3:8.1f} {rd / 1e6:7.1f} {wr / 1e6:7.1f} {tbps:5.2f} {mean[REGS]:4.0f} "
                  f"{mean[OCCUPANCY]:4.0f} {mean[SM]:4.0f} {mean[INST] / 1e6:6.1f} {mean[ISSUE]:4.0f} {mean[GRID]:7.0f} "
                  f"{mean[BLOCK]:5.0f}  {name[:80]}")


if __name__ == "__main__":
    main()
