"""Where a kernel's instructions go, from ncu's source counters: per kernel, the warp instructions it
executed, the SASS opcodes that took them (and the warp-stall samples at each), and the lines that
took the most samples. For kernels that instructions bound (ncu_summary.py's issue column near
100%), it shows what to cut: bounds tests, flag shuffling, divisions, branches around cheap math.
    ncu --section SourceCounters -o r <program>
    ncu -i r.ncu-rep --page source --csv --print-source sass > sass.csv
    python3 ncu_sass_counts.py sass.csv [--top N] [--list]
--list prints every executed instruction in address order with its executions and samples."""
import collections, csv, sys

EXECUTED, SAMPLES = "Instructions Executed", "Warp Stall Sampling (All Samples)"


def kernels(lines):
    """[(name, [(source, executed, samples)])] from the CSV's lines: each kernel starts with a
    "Kernel Name" line, then its header, then a row per SASS instruction."""
    out, head = [], None
    for row in csv.reader(lines):
        if not row:
            continue
        if row[0] == "Kernel Name":
            out.append((row[1], []))
            head = None
        elif head is None and out:
            head = {c: i for i, c in enumerate(row)}
        elif out:
            out[-1][1].append((row[head["Source"]].strip(), int(row[head[EXECUTED]]), int(row[head[SAMPLES]])))
    return out


def opcode(source):
    """The opcode of a SASS line without its predicate and modifiers: "@!P0 IMAD.WIDE.U32 R2, ..." -> IMAD."""
    words = source.split()
    word = words[1] if words[0].startswith("@") and len(words) > 1 else words[0]
    return word.split(".")[0]


def report(name, instructions, top, listing):
    executed = sum(e for _, e, _ in instructions)
    samples = sum(s for _, _, s in instructions)
    print(f"== {name[:160]}")
    print(f"warp instructions executed {executed}, stall samples {samples}")
    by_op, samples_by_op = collections.Counter(), collections.Counter()
    for source, e, s in instructions:
        by_op[opcode(source)] += e
        samples_by_op[opcode(source)] += s
    print("  executed  samples  opcode")
    for op, e in by_op.most_common(top):
        print(f"  {e:8d} {samples_by_op[op]:8d}  {op}")
    print("  the lines with the most samples (index, executed, samples, source):")
    ranked = sorted(enumerate(instructions), key=lambda item: -item[1][2])[:top]
    for i, (source, e, s) in sorted(ranked):
        print(f"  {i:5d} {e:8d} {s:6d}  {source[:100]}")
    if listing:
        for i, (source, e, s) in enumerate(instructions):
            if e:
                print(f"{i:5d} {e:8d} {s:6d}  {source[:100]}")


def main():
    args = sys.argv[1:]
    top = int(args[args.index("--top") + 1]) if "--top" in args else 20
    listing = "--list" in args
    paths = [a for i, a in enumerate(args) if not a.startswith("--") and (i == 0 or args[i - 1] != "--top")]
    if not paths:
        sys.exit(__doc__)
    for path in paths:
        with open(path, newline="") as f:
            for name, instructions in kernels(f):
                report(name, instructions, top, listing)


if __name__ == "__main__":
    main()
