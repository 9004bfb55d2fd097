#!/usr/bin/env python3
"""The last kernels an `ncu --csv --metrics gpu__time_duration.sum` run timed, in µs, and their sum:
bench/gpu_quick.sh's ncu step, whose run ends with the batch it profiles.
  python3 bench/ncu_last.py ncu.csv [COUNT]"""
import csv
import sys


def main() -> None:
    path, count = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 24
    rows = list(csv.reader(open(path, newline="")))
    head = next((i for i, r in enumerate(rows) if "Metric Name" in r), None)
    if head is None:
        sys.exit(f"{path}: no ncu table")
    names = rows[head]
    times = []
    for r in rows[head + 1:]:
        rec = dict(zip(names, r))
        if len(r) == len(names) and rec["Metric Name"] == "gpu__time_duration.sum":
            scale = {"ns": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3}.get(rec["Metric Unit"], 1e-3)
            times.append((rec["Kernel Name"], float(rec["Metric Value"].replace(",", "")) * scale))
    last = times[-count:]
    for name, us in last:
        print(f"{us:10.1f} µs  {name[:110]}")
    print(f"{sum(us for _, us in last):10.1f} µs  the last {len(last)} of {len(times)} kernels")


if __name__ == "__main__":
    main()
