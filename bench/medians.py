#!/usr/bin/env python3
"""bench/medians.py — the summary of an interleaved benchmark's rounds, for the sampler
benchmarks (bpf_sample_cost.sh, python_sample_cost.sh, java_sample_cost.sh).

Reads a results file of lines "VARIANT X [Y ...]" (one line a round), in the order the rounds
ran, and prints per variant, in the order first seen, the median of each column, the spread
(max - min) of the first and its runs; then each ratio A/B asked for, of every column.

    medians.py RESULTS "µs per sample,frames" [A/B ...]

As a module: load(path) -> {variant: [[x, y, ...], ...]}, medians(res) -> {variant: [...]}.
"""
import statistics
import sys


def load(path):
    res = {}
    for line in open(path):
        f = line.split()
        if len(f) >= 2:
            res.setdefault(f[0], []).append([float(x) for x in f[1:]])
    return res


def medians(res):
    return {v: [statistics.median(col) for col in zip(*rows)] for v, rows in res.items()}


def main(argv):
    if len(argv) < 3:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    res = load(argv[1])
    names = argv[2].split(",")
    med = medians(res)
    print("== summary (median, spread = max - min over runs) ==")
    for v, rows in res.items():
        first = [r[0] for r in rows]
        cols = ", ".join(f"{m:7.3f} {names[i] if i < len(names) else ''}".rstrip()
                         for i, m in enumerate(med[v]))
        print(f"{v:10s} median {cols} (spread {max(first) - min(first):.3f}; runs "
              f"{', '.join(f'{x:.3f}' for x in first)})")
    for ratio in argv[3:]:
        a, b = ratio.split("/")
        if a not in med or b not in med:
            print(f"{a} / {b}: no rounds of {a if a not in med else b}")
            continue
        parts = ", ".join(f"{x / y:.2f}" + (f" ({names[i]})" if i < len(names) else "")
                          for i, (x, y) in enumerate(zip(med[a], med[b])) if y)
        print(f"{a} / {b}: {parts}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
