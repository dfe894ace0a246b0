#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 The tether authors
"""cuda.core column of docs/performance.md: builds N kernel nodes whose argument is an owned buffer
with cuda.core's explicit graph API (GraphDefinition, which retains node operands like tether),
then instantiates and launches, timing the same operations as bench/graph_bench.cpp.

Runs where cuda.core >= 1.2 is installed (the H200 machines). Usage:
  python3 bench/cuda_core_bench.py [--reps 7] [--sizes 1000,10000]
Prints one RESULT line per (N, shape, operation) with the median and min..max in ns per node.
"""
import argparse
import inspect
import statistics
import sys
import time

PTX = """.version 8.0
.target sm_90
.address_size 64
.visible .entry noop(.param .u64 noop_p0)
{
  ret;
}
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--sizes", default="1000,10000")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    try:
        import cuda.core as cc
        from cuda.core import Device, LaunchConfig, Program, ProgramOptions  # noqa: F401
    except Exception as e:  # pragma: no cover - environment dependent
        print(f"SKIP cuda.core not importable: {e}")
        return 0
    try:
        from cuda.core.graph import GraphDefinition
    except Exception:
        GraphDefinition = getattr(cc, "GraphDefinition", None)
    print(f"INFO cuda.core {getattr(cc, '__version__', '?')}")
    if GraphDefinition is None:
        print("SKIP this cuda.core has no explicit GraphDefinition API")
        return 0
    dev = Device()
    dev.set_current()
    stream = dev.create_stream()
    mod = cc.ObjectCode.from_ptx(PTX.encode())
    kernel = mod.get_kernel("noop")
    buf = dev.memory_resource.allocate(64, stream=stream)
    config = LaunchConfig(grid=1, block=1)
    print("INFO GraphDefinition.launch signature:", inspect.signature(GraphDefinition.launch) if hasattr(GraphDefinition, "launch") else "n/a")

    def build(n, shape):
        g = GraphDefinition()
        nodes = []
        t0 = time.perf_counter_ns()
        for i in range(n):
            if i == 0:
                nd = g.launch(config, kernel, buf)
            else:
                prev = nodes[i - 1] if shape == "chain" else nodes[0]
                nd = prev.launch(config, kernel, buf)
            nodes.append(nd)
        t1 = time.perf_counter_ns()
        return g, nodes, t1 - t0

    for n in sizes:
        for shape in ("chain", "fan"):
            samples = {"build (owned args)": [], "instantiate": [], "launch + sync (per launch)": []}
            for rep in range(args.reps + 1):
                g, nodes, t = build(n, shape)
                t0 = time.perf_counter_ns()
                exe = g.instantiate()
                ti = time.perf_counter_ns() - t0
                exe.launch(stream)
                stream.sync()
                per = []
                for _ in range(10):
                    t0 = time.perf_counter_ns()
                    exe.launch(stream)
                    stream.sync()
                    per.append(time.perf_counter_ns() - t0)
                if rep:
                    samples["build (owned args)"].append(t / n)
                    samples["instantiate"].append(ti / n)
                    samples["launch + sync (per launch)"].append(statistics.median(per))
                del exe, g, nodes
            for k, v in samples.items():
                print(f"RESULT N={n} shape={shape} op=\"{k}\" cuda_core_ns={statistics.median(v):.1f} "
                      f"min..max={min(v):.1f}..{max(v):.1f}")
            sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
