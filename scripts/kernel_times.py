#!/usr/bin/env python3
"""Summarizes an `ncu --csv --print-units base --metrics gpu__time_duration.sum` log of one
replayed decode step (scripts/gpu_kernel_times.sh): every kernel in graph order with its grid and
time, then the time per kernel class and its share of the kernels' sum."""
import collections
import csv
import io
import re
import sys

# Kernel classes by name, first match wins.
CLASSES = [
    ("gemm (skinny)", r"skinny_"),
    ("gemm (cuBLAS)", r"gemm|nvjet|xmma|cutlass|cublas|Kernel2"),
    ("attention", r"attention|combine_partitions|reshape_and_cache"),
    ("fused (generated)", r"tessera_kernel"),
    ("norm", r"rms_norm"),
    ("rotary", r"rotary"),
    ("activation", r"and_mul"),
    ("sampling", r"sampl|argmax|top_|penalt|logprob"),
]


def kernel_class(name):
    for label, pattern in CLASSES:
        if re.search(pattern, name):
            return label
    return "other"


def main(path):
    text = open(path, encoding="utf-8", errors="replace").read()
    start = text.find('"ID"')
    if start < 0:
        sys.exit(f"kernel_times: no ncu CSV table in {path} (did the profiled replay happen?)")
    rows = list(csv.DictReader(io.StringIO(text[start:])))
    kernels = []
    for row in rows:
        if row.get("Metric Name") not in (None, "gpu__time_duration.sum"):
            continue
        value = row.get("Metric Value") or row.get("gpu__time_duration.sum")
        try:
            nanoseconds = float(str(value).replace(",", ""))
        except ValueError:
            continue
        name = row.get("Kernel Name", "?")
        short = re.sub(r"\(.*", "", name)[:60]
        kernels.append((short, row.get("Grid Size", ""), row.get("Block Size", ""), nanoseconds / 1e3))
    if not kernels:
        sys.exit(f"kernel_times: the table in {path} has no gpu__time_duration.sum values")
    total = sum(k[3] for k in kernels)
    if total <= 0:
        sys.exit(f"kernel_times: the kernels in {path} add up to no time")
    print(f"{'#':>4} {'kernel':<60} {'grid':>16} {'block':>12} {'us':>8}")
    for index, (name, grid, block, us) in enumerate(kernels):
        print(f"{index:>4} {name:<60} {grid:>16} {block:>12} {us:>8.2f}")
    by_class = collections.defaultdict(lambda: [0, 0.0])
    for name, _, _, us in kernels:
        entry = by_class[kernel_class(name)]
        entry[0] += 1
        entry[1] += us
    print(f"\n{'class':<20} {'kernels':>8} {'us':>10} {'share':>7}")
    for label, (count, us) in sorted(by_class.items(), key=lambda item: -item[1][1]):
        print(f"{label:<20} {count:>8} {us:>10.1f} {100 * us / total:>6.1f}%")
    print(f"{'sum':<20} {len(kernels):>8} {total:>10.1f}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: kernel_times.py NCU_CSV_LOG")
    main(sys.argv[1])
