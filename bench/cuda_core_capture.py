#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 The tether authors
"""cuda.core column of docs/performance.md, "Results — issue 14: capture": the work of
bench/capture_bench.cpp through cuda.core's stream capture (GraphBuilder), for the record.

- capture: N launches of a no-op kernel whose argument is a buffer, captured with
  `begin_building(mode="global")` ... `end_building()` (the time of bench/capture_bench's
  "capture" row; building the executable with `complete()` and closing are outside it). cuda.core's
  capture does not retain the launch operands (its GraphBuilder documentation says so), so this is
  comparable to the raw floor without owners.
- capture-update loop: M iterations of { capture K launches, `Graph.update(builder)`,
  `Graph.launch(stream)`, close the builder }, then one `stream.sync()`.

Runs where cuda.core (with GraphBuilder) is installed, the H200 machines. Usage:
  python3 bench/cuda_core_capture.py [--reps 11] [--sizes 1000,10000] [--k 100] [--iters 200]
Prints one RESULT line per measurement with the median and min..max.
"""
import argparse
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
    ap.add_argument("--reps", type=int, default=11)
    ap.add_argument("--sizes", default="1000,10000")
    ap.add_argument("--k", type=int, default=100)
    ap.add_argument("--iters", type=int, default=200)
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    try:
        import cuda.core as cc
        from cuda.core import Device, LaunchConfig
    except Exception as e:  # pragma: no cover - environment dependent
        print(f"SKIP cuda.core not importable: {e}")
        return 0
    print(f"INFO cuda.core {getattr(cc, '__version__', '?')}")
    dev = Device()
    dev.set_current()
    stream = dev.create_stream()
    if not hasattr(stream, "create_graph_builder"):
        print("SKIP this cuda.core has no Stream.create_graph_builder (GraphBuilder)")
        return 0
    kernel = cc.ObjectCode.from_ptx(PTX.encode()).get_kernel("noop")
    bufs = [dev.memory_resource.allocate(64, stream=stream) for _ in range(2)]
    config = LaunchConfig(grid=1, block=1)

    def capture(n, buf):
        gb = stream.create_graph_builder()
        t0 = time.perf_counter_ns()
        gb.begin_building(mode="global")
        for _ in range(n):
            cc.launch(gb, config, kernel, buf)
        gb.end_building()
        return gb, time.perf_counter_ns() - t0

    def stats(v):
        return f"{statistics.median(v):.1f} min..max={min(v):.1f}..{max(v):.1f}"

    for n in sizes:
        cap, done = [], []
        for rep in range(args.reps + 1):
            gb, t = capture(n, bufs[0])
            t0 = time.perf_counter_ns()
            gb.close()
            t1 = time.perf_counter_ns()
            if rep:  # the first is a warm-up
                cap.append(t / n)
                done.append((t1 - t0) / n)
        print(f'RESULT N={n} op="capture" cuda_core_ns_per_launch={stats(cap)}')
        print(f'RESULT N={n} op="close the builder" cuda_core_ns_per_launch={stats(done)}')
        sys.stdout.flush()

    k, iters = args.k, args.iters
    loop = []
    for rep in range(args.reps + 1):
        gb, _ = capture(k, bufs[0])
        exe = gb.complete()
        gb.close()
        exe.launch(stream)
        stream.sync()
        t0 = time.perf_counter_ns()
        for i in range(iters):
            gb, _ = capture(k, bufs[i & 1])
            exe.update(gb)
            exe.launch(stream)
            gb.close()
        stream.sync()
        t = time.perf_counter_ns() - t0
        exe.close()
        if rep:
            loop.append(t / iters)
    print(f'RESULT K={k} op="capture-update loop, {iters} iterations" cuda_core_ns_per_iteration={stats(loop)} '
          f"per_captured_launch={statistics.median(loop) / k:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
