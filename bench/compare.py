#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 The tether authors
"""Joins graph_bench's and cuda_core_bench.py's outputs into the cuda.core table of
docs/performance.md: build time per node of cuda.core, tether and the raw floor, and how many times
faster tether and the floor are than cuda.core. Usage: compare.py graph_bench.txt cuda_core.txt"""
import re
import sys

ROW = re.compile(r"^(\d+)\s+(chain|fan)\s+(.+?)\s{2,}(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)")
CC = re.compile(r'^RESULT N=(\d+) shape=(\w+) op="([^"]+)" cuda_core_ns=([\d.]+)')


def main():
    bench, cc = {}, {}
    for line in open(sys.argv[1]):
        m = ROW.match(line)
        if m and m.group(3) == "build (owned args)":
            bench[(int(m.group(1)), m.group(2))] = (float(m.group(4)), float(m.group(6)))
    for line in open(sys.argv[2]):
        m = CC.match(line)
        if m and m.group(3).startswith("build"):
            cc[(int(m.group(1)), m.group(2))] = float(m.group(4))
    print("| N | shape | build, ns per node: cuda.core | tether | raw | tether faster by | raw faster by |")
    print("|---|---|---|---|---|---|---|")
    for key in sorted(bench):
        if key not in cc:
            continue
        raw, tether = bench[key]
        c = cc[key]
        print(f"| {key[0]} | {key[1]} | {c:.0f} | {tether:.0f} | {raw:.0f} | {c / tether:.1f}x | {c / raw:.1f}x |")


if __name__ == "__main__":
    main()
